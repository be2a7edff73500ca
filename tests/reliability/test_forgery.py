"""Issue 7, item 1: at least 10,000 tampered or forged submissions through the real URL routing,
views and database: none accepted, none answered with a server error, every refusal a JSON error.
BENCHHUB_FORGERIES sets the count (default 10,000)."""

from __future__ import annotations

import json
import os
from collections import Counter
from typing import Any

import pytest
from benchhub_protocol import envelope
from django.test import Client

from benchhub.results.models import Submission
from tests.conftest import Api, build_payload, persona, signed_submission
from tests.reliability import forgeries

pytestmark = pytest.mark.django_db
FORGERY_COUNT = int(os.environ.get("BENCHHUB_FORGERIES", "10000"))


@pytest.fixture
def cast(api: Api, campaign: Any, roomy_throttles: None) -> forgeries.Cast:
    handles = ("ada", "bob", "cole", "dina", "eve")
    for handle in handles:
        assert api.register(persona(handle), handle).status_code == 201
    ada, others = persona("ada"), [persona(handle) for handle in handles[1:]]
    published = []
    for _ in range(25):
        payload = build_payload()
        assert api.submit(payload, ada).status_code == 201
        published.append(envelope.canonical_bytes(payload))
    return forgeries.Cast(ada=ada, others=others, mallory=persona("mallory"), published=published)


def test_it_accepts_none_of_ten_thousand_forged_submissions_and_never_fails(cast: forgeries.Cast) -> None:
    client = Client(raise_request_exception=False)
    rows_before = Submission.objects.count()
    outcomes: Counter[tuple[str, int, str]] = Counter()
    accepted: list[tuple[str, int]] = []
    unexplained: list[tuple[str, int, bytes]] = []
    sent = 0
    for kind, url, body in forgeries.attack(cast, FORGERY_COUNT):
        sent += 1
        answer = client.post(url, data=body, content_type="application/json")
        if answer.status_code < 400:
            accepted.append((kind, answer.status_code))
            continue
        error = answer.json() if answer["Content-Type"].startswith("application/json") else {}
        if answer.status_code >= 500 or not error.get("error") or not error.get("detail"):
            unexplained.append((kind, answer.status_code, answer.content[:300]))
        outcomes[(kind, answer.status_code, str(error.get("error")))] += 1
    for (kind, status, code), count in sorted(outcomes.items()):
        print(f"{count:6d}  {status} {code:24s} {kind}")
    assert sent >= FORGERY_COUNT
    assert accepted == []
    assert unexplained == []
    assert Submission.objects.count() == rows_before


def test_it_refuses_another_contributors_payload_signed_under_ones_own_key(api: Api, ada: envelope.Signer) -> None:
    bob = persona("bob")
    assert api.register(bob, "bob").status_code == 201
    payload = build_payload()
    assert api.submit(payload, ada).status_code == 201
    replayed = api.submit(payload, bob)
    assert replayed.status_code == 409
    assert replayed.json()["error"] == "payload_replayed"
    assert list(Submission.objects.values_list("key__keyid", flat=True)) == [ada.keyid]


def _set_padding_bits(text: str) -> str:
    """The same bytes to a lax decoder: the unused low bits of the last base64 digit set."""
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
    data = text.rstrip("=")
    unused_bits = {1: 4, 2: 2}[len(text) - len(data)]
    last = alphabet.index(data[-1]) | ((1 << unused_bits) - 1)
    return data[:-1] + alphabet[last] + text[len(data) :]


@pytest.mark.parametrize("part", ["payload", "sig"])
def test_it_refuses_an_envelope_whose_base64_has_padding_bits_set(api: Api, ada: envelope.Signer, part: str) -> None:
    """Set padding bits are a one-bit tamper that Python's decoder alone would not notice."""
    # A payload whose length is not a multiple of 3 bytes, so its base64 has padding bits to set.
    # Each payload's length varies with its nonce (the prompt rates derive from it): try until one pads.
    lengths = (json.loads(signed_submission(build_payload(model={"label": "x" * (n % 3 + 1)}), ada)) for n in range(60))
    env = next(env for env in lengths if env["payload"].endswith("="))
    target = env if part == "payload" else env["signatures"][0]
    target[part] = _set_padding_bits(target[part])
    response = api.post(Api.submissions, json.dumps(env).encode())
    assert response.status_code == 400
    assert response.json()["error"] == "bad_envelope"
    assert not Submission.objects.exists()
