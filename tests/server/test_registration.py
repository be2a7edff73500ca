"""docs/protocol.md section 3: registration with proof of possession, and linking a second key."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
from benchhub_protocol import envelope

from benchhub.accounts.models import Contributor, PublicKey
from tests.conftest import VECTOR, Api, persona, signed_registration

pytestmark = pytest.mark.django_db

# The identity point: a valid encoding of small order (libsodium refuses it, OpenSSL does not).
SMALL_ORDER_KEY = bytes([1] + [0] * 31)
NOT_ON_CURVE = bytes([2] + [0] * 31)


def forged_registration(public_key: bytes, handle: str = "mallory") -> bytes:
    """Claims `public_key` and carries the signature (R = identity, S = 0) that a verifier
    without small-order checks accepts for every message under the identity key."""
    payload = {
        "schema_version": 1,
        "handle": handle,
        "public_key": base64.b64encode(public_key).decode(),
        "created_at": "2026-11-29T10:00:00Z",
    }
    body = envelope.canonical_bytes(payload)
    forged_sig = base64.b64encode(SMALL_ORDER_KEY + bytes(32)).decode()
    return envelope.envelope_bytes(
        {
            "payloadType": envelope.REGISTRATION_TYPE,
            "payload": base64.b64encode(body).decode(),
            "signatures": [{"keyid": envelope.keyid_of(public_key), "sig": forged_sig}],
        }
    )


def test_it_registers_a_new_key(api: Api) -> None:
    signer = persona("ada")
    response = api.register(signer, "Ada")
    assert response.status_code == 201
    assert response.json() == {"handle": "Ada", "keyid": signer.keyid}
    stored = PublicKey.objects.get(keyid=signer.keyid)
    assert bytes(stored.public_key) == signer.public_key and stored.contributor.handle == "Ada"


def test_it_registers_the_protocol_vector_envelope(api: Api) -> None:
    response = api.post(Api.contributors, json.dumps(VECTOR["registration_envelope"]).encode())
    assert response.status_code == 201
    assert response.json() == {"handle": "vector", "keyid": VECTOR["keyid"]}


def test_it_answers_200_when_the_same_key_registers_the_same_handle_again(api: Api) -> None:
    signer = persona("ada")
    assert api.register(signer, "ada").status_code == 201
    again = api.register(signer, "ADA")
    assert again.status_code == 200
    assert again.json() == {"handle": "ada", "keyid": signer.keyid}
    assert Contributor.objects.count() == 1


def test_it_refuses_a_handle_that_belongs_to_other_keys_case_insensitively(api: Api) -> None:
    assert api.register(persona("ada"), "ada").status_code == 201
    response = api.register(persona("bob"), "Ada")
    assert response.status_code == 409
    assert response.json()["error"] == "handle_taken"
    assert PublicKey.objects.count() == 1


def test_it_refuses_a_key_already_registered_to_another_handle(api: Api) -> None:
    assert api.register(persona("ada"), "ada").status_code == 201
    response = api.register(persona("ada"), "someone-else")
    assert response.status_code == 409
    assert response.json()["error"] == "key_taken"


def test_it_links_a_second_key_signed_by_a_key_already_on_the_handle(api: Api) -> None:
    first, second = persona("ada"), persona("ada-laptop")
    assert api.register(first, "ada").status_code == 201
    response = api.register(second, "ada", first)
    assert response.status_code == 201
    assert set(PublicKey.objects.filter(contributor__handle="ada").values_list("keyid", flat=True)) == {
        first.keyid,
        second.keyid,
    }


def test_it_refuses_a_link_vouched_by_a_key_of_another_handle(api: Api) -> None:
    assert api.register(persona("ada"), "ada").status_code == 201
    assert api.register(persona("bob"), "bob").status_code == 201
    response = api.register(persona("mallory"), "ada", persona("bob"))
    assert response.status_code == 409
    assert not PublicKey.objects.filter(keyid=persona("mallory").keyid).exists()


def test_it_refuses_a_small_order_key_even_with_a_signature_weak_verifiers_accept(api: Api) -> None:
    response = api.post(Api.contributors, forged_registration(SMALL_ORDER_KEY))
    assert response.status_code == 400
    assert response.json()["error"] == "weak_key"
    assert response.json()["field"] == "public_key"
    assert not Contributor.objects.exists()


def test_it_refuses_a_key_that_is_not_a_curve_point(api: Api) -> None:
    response = api.post(Api.contributors, forged_registration(NOT_ON_CURVE))
    assert response.status_code == 400
    assert response.json()["error"] == "weak_key"


def test_it_answers_401_when_the_signature_does_not_verify(api: Api) -> None:
    signer, other = persona("ada"), persona("bob")
    env = json.loads(signed_registration(signer, "ada"))
    env["signatures"][0]["sig"] = json.loads(signed_registration(other, "ada"))["signatures"][0]["sig"]
    response = api.post(Api.contributors, json.dumps(env).encode())
    assert response.status_code == 401
    assert response.json()["error"] == "bad_signature"


def test_it_refuses_a_signature_under_another_keyid(api: Api) -> None:
    payload = {
        "schema_version": 1,
        "handle": "ada",
        "public_key": persona("ada").public_key_b64,
        "created_at": "2026-11-29T10:00:00Z",
    }
    env = envelope.sign(payload, envelope.REGISTRATION_TYPE, [persona("bob")])
    response = api.post(Api.contributors, envelope.envelope_bytes(env))
    assert response.status_code == 400
    assert response.json()["error"] == "keyid_mismatch"


@pytest.mark.parametrize(
    ("handle", "field"),
    [("-dash", "handle"), ("x" * 40, "handle"), ("has space", "handle")],
)
def test_it_names_the_field_of_a_bad_handle(api: Api, handle: str, field: str) -> None:
    response = api.register(persona("ada"), handle)
    assert response.status_code == 400
    body: dict[str, Any] = response.json()
    assert body["error"] == "schema_violation" and body["field"] == field
