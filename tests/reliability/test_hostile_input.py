"""Issue 25: the requests that answered 500 without any key. Each now answers a 4xx JSON error
naming the problem (a 404 page on the site), or, where the input is legal, the page it asks for."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import pytest
from benchhub_protocol import envelope
from django.test import Client

from benchhub.results.models import Submission
from tests.conftest import Api, build_payload
from tests.reliability.test_malformed import assert_json_refusal
from tests.server.sqlite_process import run_on_fresh_sqlite

pytestmark = pytest.mark.django_db

# One digit past CPython's int-string conversion limit (sys.int_info.default_max_str_digits, 4300).
HUGE_INTEGER = b"9" * 4301


@pytest.mark.parametrize(
    "url", [Api.submissions, Api.contributors, "/api/v1/submissions/00000000-0000-0000-0000-000000000000/withdraw"]
)
def test_it_refuses_an_integer_of_4301_digits_as_bad_json(api: Api, campaign: Any, url: str) -> None:
    for body in (b'{"payloadType":' + HUGE_INTEGER + b"}", b"[" + HUGE_INTEGER + b"]"):
        refusal = assert_json_refusal(api.post(url, body), 400)
        assert refusal["error"] == "bad_json", refusal


def test_it_refuses_a_signed_payload_holding_an_integer_of_4301_digits(api: Api, ada: envelope.Signer) -> None:
    raw = envelope.canonical_bytes(build_payload()).replace(b'"n_params":1720574976', b'"n_params":' + HUGE_INTEGER)
    signed = envelope.envelope_bytes(
        {
            "payloadType": envelope.SUBMISSION_TYPE,
            "payload": envelope.b64encode(raw),
            "signatures": [ada.signature(envelope.SUBMISSION_TYPE, raw)],
        }
    )
    assert assert_json_refusal(api.post(Api.submissions, signed), 400)["error"] == "bad_json"


def _cursor(query: str) -> str:
    return base64.b64encode(query.encode()).decode()


CRAFTED_CURSORS = [
    "p=abc",
    "p=2026-12-03T10:00:00",  # no offset: not an instant
    "p=99999999999999999999999",
    "p=-1&r=1&o=3",
    "p=%00",
    "o=abc",
    "not base64!",
]


@pytest.mark.parametrize("url", ["/api/v1/submissions/", "/api/v1/measurements/", "/api/v1/measurements.csv"])
def test_it_refuses_a_crafted_cursor_naming_the_parameter(api: Api, ada: envelope.Signer, url: str) -> None:
    assert api.submit(build_payload(), ada).status_code == 201
    client = Client(raise_request_exception=False)
    for crafted in CRAFTED_CURSORS:
        raw = crafted if " " in crafted else _cursor(crafted)
        response = client.get(url, {"cursor": raw})
        if url.endswith(".csv"):  # the export is not paged: a cursor there means nothing
            assert response.status_code == 200, (crafted, response.status_code)
            continue
        refusal = assert_json_refusal(response, 400)
        assert refusal["error"] == "invalid_cursor" and refusal["field"] == "cursor", (crafted, refusal)


def test_it_pages_from_a_cursor_with_an_offset_postgresql_refuses(api: Api, ada: envelope.Signer) -> None:
    """+23:59 is legal in ISO 8601; PostgreSQL refused it (a 500). The position is read in UTC."""
    assert api.submit(build_payload(), ada).status_code == 201
    client = Client(raise_request_exception=False)
    for stamp, count in (("2999-01-01T00:00:00%2B23:59", 1), ("2000-01-01T00:00:00-23:59", 0)):
        response = client.get("/api/v1/submissions/", {"cursor": _cursor(f"p={stamp}")})
        assert response.status_code == 200, response.content[:300]
        assert len(response.json()["results"]) == count


def test_the_cursors_the_api_issues_still_page(api: Api, ada: envelope.Signer) -> None:
    for rate in (150, 151, 152):  # distinct sweeps: the same rows again are a duplicate
        assert (
            api.submit(build_payload(tg={"upstream": {1: [rate, rate]}, "01": {1: [rate, rate]}}), ada).status_code
            == 201
        )
    client = Client()
    for url in ("/api/v1/submissions/", "/api/v1/measurements/"):
        first = client.get(url, {"page_size": 1}).json()
        second = client.get(first["next"]).json()
        back = client.get(second["previous"]).json()
        assert second["results"] and second["results"] != first["results"], url
        assert back["results"] == first["results"], url


def test_it_answers_a_nul_in_a_contributor_handle_with_the_404_page(api: Api, ada: envelope.Signer) -> None:
    client = Client(raise_request_exception=False)
    for path in ("/contributors/%00/", "/contributors/a%00b/", "/contributors/%E2%80%AEada/", "/contributors/ada/x/"):
        response = client.get(path)
        assert response.status_code == 404, (path, response.status_code)
        assert response["Content-Type"].startswith("text/html")
    assert client.get("/contributors/ADA/").status_code == 200


@pytest.mark.parametrize("offset", ["+23:59", "-23:59", "+14:00", "Z"])
def test_it_pages_the_site_from_a_cursor_with_any_legal_offset(api: Api, ada: envelope.Signer, offset: str) -> None:
    """`before` is an instant and a submission id; an offset of up to ±23:59 is legal ISO 8601 and
    RFC 3339, so the page is the one before that instant (PostgreSQL refused offsets past ±15:59)."""
    created = api.submit(build_payload(), ada).json()["id"]
    client = Client(raise_request_exception=False)
    later = client.get("/contributors/ada/", {"before": f"2999-01-01T00:00:00{offset}~{'f' * 32}"})
    earlier = client.get("/contributors/ada/", {"before": f"2000-01-01T00:00:00{offset}~{'f' * 32}"})
    assert later.status_code == earlier.status_code == 200, (later.status_code, earlier.status_code)
    assert created in later.content.decode() and created not in earlier.content.decode()
    # Legal in ISO 8601, past datetime's range once in UTC: read as no cursor, the first page.
    past_the_calendar = client.get("/contributors/ada/", {"before": f"9999-12-31T23:00:00-23:59~{'f' * 32}"})
    assert past_the_calendar.status_code == 200 and created in past_the_calendar.content.decode()


@pytest.mark.parametrize(("tg_tps", "field"), [(5e-324, "tg_tps"), (1e300, "tg_tps"), (1e12, "tg_tps")])
def test_it_refuses_a_signed_rate_past_the_bounds_before_storing_it(
    api: Api, ada: envelope.Signer, tg_tps: float, field: str
) -> None:
    """The issue's `upstream 5e-324` and `01 1e300` rows were accepted with a 201; their ratio was inf."""
    payload = build_payload()
    payload["sweep"]["runs"][1]["rows"][0]["tg_tps"] = tg_tps
    refusal = assert_json_refusal(api.submit(payload, ada), 400)
    assert (refusal["error"], refusal["field"]) == ("schema_violation", f"sweep.runs[1].rows[0].{field}")
    assert not Submission.objects.exists()


def test_it_refuses_a_chip_name_holding_a_bidi_override(api: Api, ada: envelope.Signer) -> None:
    refusal = assert_json_refusal(api.submit(build_payload(machine={"chip": "Apple \u202eorP 5M"}), ada), 400)
    assert (refusal["error"], refusal["field"]) == ("schema_violation", "machine.chip")


EMBEDDED = """
import json, django
django.setup()
from django.core.management import call_command
from django.test import Client
call_command("migrate", verbosity=0)
client = Client(raise_request_exception=False)
answers = {}
for url in ("/api/v1/submissions/", "/api/v1/measurements/"):
    response = client.get(url, {"gpu_cores": "9" * 20, "batch_size": "-" + "9" * 20})
    answers[url] = [response.status_code, response.json().get("field")]
print(json.dumps(answers))
"""


def test_it_refuses_an_integer_filter_past_64_bits_on_the_embedded_sqlite_default(tmp_path: Path) -> None:
    """PostgreSQL compares such a number; SQLite cannot bind it (OverflowError, a 500)."""
    answers = run_on_fresh_sqlite(tmp_path, EMBEDDED, timeout=180)
    assert set(map(tuple, answers.values())) == {(400, "gpu_cores")}, answers
