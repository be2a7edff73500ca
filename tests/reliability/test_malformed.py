"""Issue 7, item 3: a fixed adversarial corpus. Every refusal is a 4xx JSON error that names the
problem (and the field, where one field is at fault); nothing is a 500, nothing is stored."""

from __future__ import annotations

import base64
import copy
import json
from typing import Any

import pytest
from benchhub_protocol import envelope
from django.test import Client

from benchhub.results.models import Submission
from tests.conftest import Api, build_payload, persona, signed_registration
from tests.reliability.payload_paths import (
    NULLABLE,
    OPTIONAL,
    dotted,
    drop_at,
    leaves_and_keys,
    set_at,
    wrong_types,
)

pytestmark = pytest.mark.django_db


def assert_json_refusal(response: Any, status: int | None = None) -> dict[str, Any]:
    assert 400 <= response.status_code < 500, (response.status_code, response.content[:300])
    if status is not None:
        assert response.status_code == status, response.content[:300]
    assert response["Content-Type"].startswith("application/json"), response.content[:300]
    body: dict[str, Any] = response.json()
    assert body.get("error") and body.get("detail"), body
    return body


def test_it_names_the_field_for_a_wrong_type_in_every_field(
    api: Api, ada: envelope.Signer, roomy_throttles: None
) -> None:
    template = build_payload()
    misnamed: list[tuple[str, Any, Any]] = []
    tried = 0
    for path, value in list(leaves_and_keys(template)):
        for replacement in wrong_types(value):
            if replacement is None and path in NULLABLE:
                continue
            payload = copy.deepcopy(template)
            payload["nonce"] = f"{tried:032x}"
            set_at(payload, path, replacement)
            tried += 1
            body = assert_json_refusal(api.submit(payload, ada), 400)
            if body.get("field") != dotted(path) and path[0] != "nonce":
                misnamed.append((dotted(path), replacement, body))
    assert tried > 300
    assert misnamed == []
    assert not Submission.objects.exists()


def test_it_names_every_missing_required_field(api: Api, ada: envelope.Signer, roomy_throttles: None) -> None:
    template = build_payload()
    # tensor_bytes_by_type and env are maps whose entries are all optional, not fields.
    dict_keys = [
        path
        for path, _ in leaves_and_keys(template)
        if isinstance(path[-1], str) and not {"tensor_bytes_by_type", "env"} & set(path[:-1])
    ]
    misnamed = []
    for number, path in enumerate(dict_keys):
        payload = copy.deepcopy(template)
        payload["nonce"] = f"{number:032x}"
        # Sweep rows of their own: the same rows again from this key are a 409 duplicate_measurement.
        payload["sweep"]["runs"][0]["rows"][0]["pp_tps"] = 500 + number
        drop_at(payload, path)
        response = api.submit(payload, ada)
        if path in OPTIONAL:
            assert response.status_code == 201, response.content
            continue
        if response.status_code < 400:
            misnamed.append((dotted(path), response.status_code))
            continue
        body = assert_json_refusal(response, 400)
        if body.get("field") != dotted(path):
            misnamed.append((dotted(path), body))
    assert len(dict_keys) > 50
    assert misnamed == []


def _signed(ada: envelope.Signer, body: bytes) -> bytes:
    signature = ada.signature(envelope.SUBMISSION_TYPE, body)
    return json.dumps(
        {"payloadType": envelope.SUBMISSION_TYPE, "payload": base64.b64encode(body).decode(), "signatures": [signature]}
    ).encode()


def payload_corpus() -> list[tuple[str, bytes, str]]:
    """Signed payload bytes a careless or hostile client could produce, with the error code expected."""
    canonical = envelope.canonical_bytes(build_payload())
    n_params = b'"n_params":1720574976'
    assert n_params in canonical

    def swap(new: bytes) -> bytes:
        return canonical.replace(n_params, b'"n_params":' + new)

    nested = b"[" * 40 + b"1" + b"]" * 40
    return [
        ("2^53+1", swap(b"9007199254740993"), "not_canonical"),
        ("-(2^53+1)", swap(b"-9007199254740993"), "not_canonical"),
        ("1e400", swap(b"1e400"), "not_canonical"),
        ("NaN", swap(b"NaN"), "bad_json"),
        ("Infinity", swap(b"Infinity"), "bad_json"),
        ("-Infinity", swap(b"-Infinity"), "bad_json"),
        ("1.0 where canonical is 1", swap(b"1720574976.0"), "not_canonical"),
        ("invalid UTF-8", canonical.replace(b"Apple M5 Pro", b"Apple \xff5 Pro"), "bad_json"),
        ("overlong UTF-8", canonical.replace(b"Apple M5 Pro", b"Apple \xc0\xaf5 Pro"), "bad_json"),
        ("lone surrogate", canonical.replace(b"Apple M5 Pro", b"Apple \\ud800 Pro"), "not_canonical"),
        ("byte-order mark", b"\xef\xbb\xbf" + canonical, "bad_json"),
        ("duplicate key", canonical.replace(b'{"agent":', b'{"agent":1,"agent":', 1), "bad_json"),
        ("40-deep nesting", swap(nested), "too_deep"),
        ("trailing garbage", canonical + b"x", "bad_json"),
        ("a JSON array", b"[1,2,3]", "bad_payload"),
        ("empty", b"", "bad_json"),
        ("schema_version as a string", canonical.replace(b'"schema_version":1', b'"schema_version":"1"'), ""),
        ("600 KB string", canonical.replace(b"Apple M5 Pro", b"A" * 600_000, 1), "schema_violation"),
        (
            "100,000-entry list",
            canonical.replace(b'"flags":[]', b'"flags":[' + b",".join([b'"x"'] * 100_000) + b"]"),
            "",
        ),
    ]


def envelope_corpus(ada: envelope.Signer) -> list[tuple[str, bytes]]:
    good: dict[str, Any] = {}
    while not good.get("payload", "").endswith("="):  # a payload with padding, so "unpadded" differs from it
        good = json.loads(envelope.envelope_bytes(envelope.sign(build_payload(), envelope.SUBMISSION_TYPE, [ada])))

    def edited(**changes: Any) -> bytes:
        return json.dumps({**good, **changes}).encode()

    sig = good["signatures"][0]
    return [
        ("empty body", b""),
        ("whitespace", b"   \n"),
        ("null", b"null"),
        ("array", b"[]"),
        ("string", b'"envelope"'),
        ("number", b"1e400"),
        ("empty object", b"{}"),
        ("NaN in the envelope", b'{"payloadType":NaN}'),
        ("invalid UTF-8", b'{"payloadType":"\xff"}'),
        ("lone surrogate type", b'{"payloadType":"\\udc00","payload":"","signatures":[]}'),
        ("41-deep", b'{"a":' * 41 + b"1" + b"}" * 41),
        ("unknown field", edited(extra=1)),
        ("payload not base64", edited(payload="not base64!")),
        ("payload URL-safe base64", edited(payload=good["payload"].replace("+", "-").replace("/", "_") + "-_")),
        ("payload unpadded", edited(payload=good["payload"].rstrip("="))),
        ("payload a number", edited(payload=12)),
        ("signatures an object", edited(signatures={})),
        ("no signatures", edited(signatures=[])),
        ("three signatures", edited(signatures=[sig, sig, sig])),
        ("signature without sig", edited(signatures=[{"keyid": sig["keyid"]}])),
        ("uppercase keyid", edited(signatures=[{**sig, "keyid": sig["keyid"].upper()}])),
        ("63-byte sig", edited(signatures=[{**sig, "sig": base64.b64encode(bytes(63)).decode()}])),
        (
            "surrogate in sig",
            b'{"payloadType":"%s","payload":"","signatures":[{"keyid":"%s","sig":"\\ud800"}]}'
            % (envelope.SUBMISSION_TYPE.encode(), sig["keyid"].encode()),
        ),
        ("keyid a list", edited(signatures=[{**sig, "keyid": [sig["keyid"]]}])),
        ("2 MB body", b'{"payload":"' + b"A" * (2 * 1024 * 1024) + b'"}'),
    ]


def test_it_refuses_the_adversarial_payload_corpus_with_json_errors(
    api: Api, ada: envelope.Signer, roomy_throttles: None
) -> None:
    for name, raw, expected in payload_corpus():
        body = assert_json_refusal(api.post(Api.submissions, _signed(ada, raw)))
        assert not expected or body["error"] == expected, (name, body)
    assert not Submission.objects.exists()


@pytest.mark.parametrize("url", [Api.submissions, Api.contributors])
def test_it_refuses_the_adversarial_envelope_corpus_at_both_endpoints(
    api: Api, ada: envelope.Signer, roomy_throttles: None, url: str
) -> None:
    for name, raw in envelope_corpus(ada):
        body = assert_json_refusal(api.post(url, raw))
        assert body["error"] != "server_error", name
    assert not Submission.objects.exists()


def test_it_refuses_malformed_registrations_naming_the_field(api: Api, campaign: Any) -> None:
    signer = persona("newcomer")
    valid = json.loads(signed_registration(signer, "newcomer"))
    payload = json.loads(base64.b64decode(valid["payload"]))
    cases = {
        "handle": ["-dash", "a" * 40, "", "x y", "\u00e9t\u00e9", 7, None],
        "public_key": ["", "A" * 44, 7, base64.b64encode(bytes(31)).decode()],
        "created_at": ["yesterday", "2026-13-40T99:99:99Z", 0],
        "schema_version": [2, "1", None],
    }
    problems = []
    for field, values in cases.items():
        for value in values:
            body = envelope.canonical_bytes({**payload, field: value})
            raw = json.dumps(
                {
                    "payloadType": envelope.REGISTRATION_TYPE,
                    "payload": base64.b64encode(body).decode(),
                    "signatures": [signer.signature(envelope.REGISTRATION_TYPE, body)],
                }
            ).encode()
            answer = api.post(Api.contributors, raw)
            if answer.status_code < 400 or assert_json_refusal(answer).get("field") != field:
                problems.append((field, value, answer.status_code, answer.content[:200]))
    assert problems == []


QUERY_VALUES = ["\x00", "a\x00b", "a" * 5000, "99999999999999999999", "-1", "1e3", "\u2603", "%", "' OR 1=1 --"]


def test_it_answers_hostile_query_strings_without_a_server_error(api: Api, ada: envelope.Signer) -> None:
    assert api.submit(build_payload(), ada).status_code == 201
    client = Client(raise_request_exception=False)
    filters = ("campaign", "chip", "gpu_cores", "quant", "variant", "batch_size", "contributor", "cursor", "page_size")
    failures = []
    for url in ("/api/v1/submissions/", "/api/v1/measurements/", "/api/v1/measurements.csv", "/api/v1/leaderboard/"):
        for name in filters:
            for value in QUERY_VALUES:
                params = (
                    {name: value}
                    if url != "/api/v1/leaderboard/" or name == "campaign"
                    else {"campaign": "mv-ext-iquants", name: value}
                )
                response = client.get(url, params)
                content = b"".join(response) if response.streaming else response.content
                if response.status_code >= 500:
                    failures.append((url, name, value[:20], response.status_code))
                elif response.status_code >= 400:
                    assert json.loads(content).get("error"), (url, name, value[:20], content[:200])
    for path in (
        "/api/v1/submissions/not-a-uuid/",
        "/api/v1/submissions/00000000-0000-0000-0000-000000000000/",
        "/api/v1/submissions/00000000-0000-0000-0000-000000000000/envelope",
        "/api/v1/campaigns/no-such-campaign/",
        "/api/v1/campaigns/mv-ext-iquants/patches/..%2F..%2Fsettings.py",
        "/api/v1/campaigns/mv-ext-iquants/patches/%00",
    ):
        response = client.get(path)
        if response.status_code >= 500:
            failures.append((path, "", "", response.status_code))
        else:
            assert_json_refusal(response, 404)
    assert failures == []
