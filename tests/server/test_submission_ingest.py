"""docs/protocol.md section 4: signed submissions, verified over the exact bytes, stored atomically."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest
from benchhub_protocol import envelope, schema
from django.db import connection
from django.test.utils import CaptureQueriesContext

from benchhub.accounts.models import PublicKey
from benchhub.results.models import (
    Measurement,
    RawEnvelope,
    Submission,
    SweepRow,
)
from tests.conftest import VECTOR, Api, build_payload, persona, signed_submission

pytestmark = pytest.mark.django_db


def test_it_stores_the_raw_envelope_and_every_normalised_row(api: Api, ada: envelope.Signer) -> None:
    body = signed_submission(build_payload(), ada)
    response = api.post(Api.submissions, body)
    assert response.status_code == 201
    created = response.json()
    assert set(created) == {"id", "url", "status", "counts_from"}
    assert created["status"] == "accepted"
    assert created["url"] == f"http://testserver/submissions/{created['id']}/"
    submission = Submission.objects.get(pk=created["id"])
    assert bytes(submission.raw.body) == body
    assert [v.name for v in submission.variants.all()] == ["upstream", "01"]
    assert SweepRow.objects.filter(run__submission=submission).count() == 8
    assert submission.correctness.count() == 2 and submission.generation.count() == 2
    assert submission.machine.chip == "Apple M5 Pro" and submission.model_file.file_type == "IQ2_XXS"
    speedup = Measurement.objects.get(submission=submission, variant_name="01", batch_size=4).speedup
    assert speedup == pytest.approx(210.0 / 148.0)


def test_it_serves_the_stored_envelope_byte_for_byte(api: Api, ada: envelope.Signer) -> None:
    body = signed_submission(build_payload(), ada)
    submission_id = api.post(Api.submissions, body).json()["id"]
    response = api.client.get(f"/api/v1/submissions/{submission_id}/envelope")
    assert response.status_code == 200
    assert response.content == body


def test_it_answers_a_retry_of_the_identical_envelope_with_200_and_the_same_id(api: Api, ada: envelope.Signer) -> None:
    body = signed_submission(build_payload(), ada)
    first = api.post(Api.submissions, body)
    again = api.post(Api.submissions, body)
    assert (first.status_code, again.status_code) == (201, 200)
    assert again.json() == first.json()
    assert Submission.objects.count() == 1


def test_it_refuses_a_reused_nonce_with_different_bytes(api: Api, ada: envelope.Signer) -> None:
    assert api.submit(build_payload(nonce="ab" * 16), ada).status_code == 201
    response = api.submit(build_payload(nonce="ab" * 16, machine={"chip": "Apple M1"}), ada)
    assert response.status_code == 409
    assert response.json()["error"] == "nonce_reused"
    assert Submission.objects.count() == 1


def test_it_looks_for_a_retry_or_a_replay_in_one_query(api: Api, ada: envelope.Signer) -> None:
    """Both unique keys, (key, nonce) and the payload's hash, are read together (issue 6: a round trip
    less on every new submission)."""

    def by_nonce_or_hash(sql: str) -> bool:
        where = sql.partition(" WHERE ")[2]
        return sql.startswith("SELECT") and any(
            f'"results_submission"."{column}" = ' in where for column in ("nonce", "payload_sha256")
        )

    body = signed_submission(build_payload(), ada)
    for expected_status in (201, 200):  # the new submission, then its retry
        with CaptureQueriesContext(connection) as queries:
            assert api.post(Api.submissions, body).status_code == expected_status
        assert len([query for query in queries if by_nonce_or_hash(query["sql"])]) == 1


def test_it_lets_two_keys_use_the_same_nonce(api: Api, ada: envelope.Signer) -> None:
    bob = persona("bob")
    assert api.register(bob, "bob").status_code == 201
    assert api.submit(build_payload(nonce="cd" * 16), ada).status_code == 201
    other = build_payload(
        nonce="cd" * 16, machine={"chip": "Apple M1"}, tg={"upstream": {4: [90, 91]}, "01": {4: [99, 98]}}
    )
    assert api.submit(other, bob).status_code == 201


def test_it_answers_401_for_an_unregistered_key(api: Api, campaign: Any) -> None:
    response = api.submit(build_payload(), persona("stranger"))
    assert response.status_code == 401
    assert response.json()["error"] == "unknown_key"


def test_it_answers_401_for_a_flipped_payload_byte(api: Api, ada: envelope.Signer) -> None:
    env = json.loads(signed_submission(build_payload(), ada))
    payload = bytearray(base64.b64decode(env["payload"]))
    payload[payload.index(b"Apple M5 Pro")] ^= 0x01
    env["payload"] = base64.b64encode(bytes(payload)).decode()
    response = api.post(Api.submissions, json.dumps(env).encode())
    assert response.status_code == 401
    assert response.json()["error"] == "bad_signature"
    assert not Submission.objects.exists()


def test_it_refuses_a_replay_of_another_keys_envelope(api: Api, ada: envelope.Signer) -> None:
    """Bob re-sends Ada's signed envelope under his own keyid: the signature is not his."""
    bob = persona("bob")
    assert api.register(bob, "bob").status_code == 201
    env = json.loads(signed_submission(build_payload(), ada))
    env["signatures"][0]["keyid"] = bob.keyid
    response = api.post(Api.submissions, json.dumps(env).encode())
    assert response.status_code == 401
    assert not Submission.objects.exists()


def test_it_refuses_a_forged_signature_under_a_stored_small_order_key(
    api: Api, campaign: Any, ada: envelope.Signer
) -> None:
    """Even if a small-order key were in the table, the identity-point forgery that OpenSSL-style
    verifiers accept for any message must not verify."""
    identity = bytes([1] + [0] * 31)
    PublicKey.objects.create(
        keyid=envelope.keyid_of(identity),
        public_key=identity,
        contributor=PublicKey.objects.get(keyid=ada.keyid).contributor,
    )
    body = envelope.canonical_bytes(build_payload())
    forged = {
        "payloadType": envelope.SUBMISSION_TYPE,
        "payload": base64.b64encode(body).decode(),
        "signatures": [{"keyid": envelope.keyid_of(identity), "sig": base64.b64encode(identity + bytes(32)).decode()}],
    }
    response = api.post(Api.submissions, envelope.envelope_bytes(forged))
    assert response.status_code == 401
    assert not Submission.objects.exists()


def test_it_refuses_a_signed_payload_that_is_not_canonical(api: Api, ada: envelope.Signer) -> None:
    body = json.dumps(build_payload(), indent=1).encode()
    env = {
        "payloadType": envelope.SUBMISSION_TYPE,
        "payload": base64.b64encode(body).decode(),
        "signatures": [ada.signature(envelope.SUBMISSION_TYPE, body)],
    }
    response = api.post(Api.submissions, json.dumps(env).encode())
    assert response.status_code == 400
    assert response.json()["error"] == "not_canonical"


def test_it_refuses_a_signed_payload_with_duplicate_keys(api: Api, ada: envelope.Signer) -> None:
    canonical = envelope.canonical_bytes(build_payload())
    body = canonical.replace(b'{"agent":', b'{"agent":{"name":"x","version":"y"},"agent":', 1)
    env = {
        "payloadType": envelope.SUBMISSION_TYPE,
        "payload": base64.b64encode(body).decode(),
        "signatures": [ada.signature(envelope.SUBMISSION_TYPE, body)],
    }
    response = api.post(Api.submissions, json.dumps(env).encode())
    assert response.status_code == 400
    assert response.json()["error"] == "bad_json"


def test_it_refuses_duplicate_keys_in_the_envelope(api: Api, ada: envelope.Signer) -> None:
    body = signed_submission(build_payload(), ada).replace(b'{"payload":', b'{"payload":"AAAA","payload":', 1)
    response = api.post(Api.submissions, body)
    assert response.status_code == 400
    assert response.json()["error"] == "bad_json"


def test_it_refuses_a_1000_deep_body_with_400(api: Api, campaign: Any) -> None:
    response = api.post(Api.submissions, b"[" * 1000 + b"]" * 1000)
    assert response.status_code == 400
    assert response.json()["error"] == "too_deep"


def test_it_answers_413_in_json_for_a_3_mb_body(api: Api, campaign: Any) -> None:
    body = b'{"payload":"' + b"A" * (3 * 1024 * 1024) + b'"}'
    response = api.post(Api.submissions, body)
    assert response.status_code == 413
    assert response["Content-Type"].startswith("application/json")
    assert response.json()["error"] == "too_large"


@pytest.mark.parametrize(
    ("mutate", "field"),
    [
        (lambda p: p["machine"].update(gpu_cores="twenty"), "machine.gpu_cores"),
        (lambda p: p["sweep"]["runs"][0]["rows"][0].pop("tg_tps"), "sweep.runs[0].rows[0].tg_tps"),
        (lambda p: p.update(surprise=1), "surprise"),
        (lambda p: p.update(nonce="XYZ"), "nonce"),
    ],
)
def test_it_names_the_field_of_a_schema_violation(api: Api, ada: envelope.Signer, mutate: Any, field: str) -> None:
    payload = build_payload()
    mutate(payload)
    response = api.submit(payload, ada)
    assert response.status_code == 400
    assert response.json()["error"] == "schema_violation"
    assert response.json()["field"] == field


def test_it_refuses_the_vector_payload_whose_patch_hashes_are_placeholders(api: Api, campaign: Any) -> None:
    signer = envelope.Signer.from_seed(bytes.fromhex(VECTOR["key_seed_hex"]))
    assert api.post(Api.contributors, json.dumps(VECTOR["registration_envelope"]).encode()).status_code == 201
    response = api.post(Api.submissions, json.dumps(VECTOR["submission_envelope"]).encode())
    assert response.status_code == 400
    assert response.json() == {
        "error": "wrong_patches",
        "detail": "Patches of 01 differ from the manifest.",
        "field": "variants[1].patches",
    }
    assert signer.keyid == VECTOR["keyid"]


@pytest.mark.parametrize(
    ("mutate", "code", "field"),
    [
        (lambda p: p.update(campaign="no-such-campaign"), "unknown_campaign", "campaign"),
        (lambda p: p["variants"].reverse(), "baseline_first", "variants[0].name"),
        (lambda p: p["variants"][1].update(commit="f" * 40), "wrong_commit", "variants[1]"),
        (lambda p: p["llama_cpp"].update(repo="https://example.com/fork"), "wrong_repo", "llama_cpp.repo"),
    ],
)
def test_it_checks_variants_against_the_campaign(
    api: Api, ada: envelope.Signer, mutate: Any, code: str, field: str
) -> None:
    payload = build_payload()
    mutate(payload)
    response = api.submit(payload, ada)
    assert response.status_code == 400
    assert (response.json()["error"], response.json()["field"]) == (code, field)


def test_it_refuses_a_variant_whose_patch_file_is_missing(api: Api, ada: envelope.Signer, patches_dir: Path) -> None:
    (patches_dir / "02-vectorized-bs1.patch").unlink()
    payload = build_payload(tg={"upstream": {1: [100, 100]}, "01+02": {1: [110, 110]}})
    response = api.submit(payload, ada)
    assert response.status_code == 400
    assert response.json()["error"] == "variant_unavailable"


def test_it_refuses_a_banned_key_with_403(api: Api, ada: envelope.Signer) -> None:
    PublicKey.objects.filter(keyid=ada.keyid).update(banned=True)
    response = api.submit(build_payload(), ada)
    assert response.status_code == 403
    assert response.json()["error"] == "key_banned"


def test_it_flags_what_it_sees_even_when_the_agent_does_not(api: Api, ada: envelope.Signer) -> None:
    payload = build_payload(
        machine={"power_source": "battery"},
        tg={"upstream": {4: [148, 148]}, "01": {4: [150, 210]}},
        degenerate={"01": True},
    )
    response = api.submit(payload, ada)
    assert response.json()["status"] == "flagged"
    assert Submission.objects.get().flags == [
        "degenerate_output",
        "high_spread",
        "on_battery",
        "variant_output_mismatch",
    ]


def test_it_keeps_raw_envelopes_immutable_in_the_database(api: Api, ada: envelope.Signer) -> None:
    from django.db import DatabaseError, connection, transaction

    assert api.submit(build_payload(), ada).status_code == 201
    with pytest.raises(DatabaseError), transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("UPDATE results_rawenvelope SET body = %s", [b"{}"])
    assert RawEnvelope.objects.count() == 1


def test_it_refuses_an_integer_beyond_2_to_the_53(api: Api, ada: envelope.Signer) -> None:
    payload = build_payload(model={"size_bytes": 2**53})
    body = json.dumps(payload, separators=(",", ":"), sort_keys=True).encode()
    env = {
        "payloadType": envelope.SUBMISSION_TYPE,
        "payload": base64.b64encode(body).decode(),
        "signatures": [ada.signature(envelope.SUBMISSION_TYPE, body)],
    }
    response = api.post(Api.submissions, json.dumps(env).encode())
    assert response.status_code == 400
    assert response.json()["error"] == "not_canonical"


def test_it_refuses_a_registration_envelope_at_the_submission_endpoint(api: Api, ada: envelope.Signer) -> None:
    response = api.post(Api.submissions, json.dumps(VECTOR["registration_envelope"]).encode())
    assert response.status_code == 400
    assert (response.json()["error"], response.json()["field"]) == ("wrong_payload_type", "payloadType")


def test_it_stores_the_largest_counts_the_schema_allows(api: Api, ada: envelope.Signer) -> None:
    def largest(section: dict[str, Any], name: str) -> int:
        return int(section["properties"][name]["maximum"])

    machine, correctness = schema.MACHINE_SCHEMA, schema.CORRECTNESS_SCHEMA
    cores, memory = largest(machine, "cpu_cores_performance"), largest(machine, "memory_bytes")
    payload = build_payload(machine={"cpu_cores_performance": cores, "memory_bytes": memory})
    payload["correctness"][0].update(passed=largest(correctness, "passed"), failed=largest(correctness, "failed"))
    payload["generation"][0]["n_tokens"] = largest(schema.GENERATION_SCHEMA, "n_tokens")
    response = api.submit(payload, ada)
    assert response.status_code == 201
    assert Submission.objects.get().correctness.get(variant__name="upstream").passed == largest(correctness, "passed")


def test_it_refuses_a_nul_character_with_400_naming_the_field(api: Api, ada: envelope.Signer) -> None:
    response = api.submit(build_payload(machine={"os_version": "15.7\x00"}), ada)
    assert response.status_code == 400
    assert response.json()["field"] == "machine.os_version"
    tensor_key = build_payload(model={"tensor_bytes_by_type": {"Q4\x00K": 1}})
    assert api.submit(tensor_key, ada).json()["field"] == "model.tensor_bytes_by_type"
    assert not Submission.objects.exists()
