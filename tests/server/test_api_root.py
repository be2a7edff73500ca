"""Issue 33: the API root lists every endpoint, and every path under /api/v1/ that no endpoint takes
answers JSON (DEBUG or not), naming the field at fault for a malformed id."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client
from django.urls import URLPattern, get_resolver

from benchhub.api import root

pytestmark = pytest.mark.django_db


def named_routes() -> set[str]:
    api = next(r for r in get_resolver().url_patterns if str(r.pattern) == "api/v1/")
    return {p.name for p in api.url_patterns if isinstance(p, URLPattern) and p.name}  # type: ignore[attr-defined]


def test_the_root_lists_every_endpoint(client: Client) -> None:
    response = client.get("/api/v1/")
    assert response.status_code == 200 and response["Content-Type"] == "application/json"
    body = response.json()
    paths = {entry["path"] for entry in body["endpoints"]}
    assert {"/api/v1/leaderboard/", "/api/v1/submissions/{id}/", "/api/v1/snapshot/"} <= paths
    assert {name for name, _, _ in root.ENDPOINTS} == named_routes() - {"api-root"}
    assert body["docs"].endswith("/api/v1/docs/")


@pytest.mark.parametrize("debug", [True, False])
@pytest.mark.parametrize(
    ("path", "field"),
    [
        ("/api/v1/submissions/not-an-id/", "id"),
        ("/api/v1/submissions/42/envelope", "id"),
        ("/api/v1/submissions/0193a6f0-0000-7000-8000-000000000000/nothing", None),
        ("/api/v1/no-such-thing", None),
    ],
)
def test_paths_no_endpoint_takes_answer_json(client: Client, settings: Any, debug: bool, path: str, field: str) -> None:
    settings.DEBUG = debug
    response = client.get(path)
    assert response.status_code == 404
    assert response["Content-Type"] == "application/json"
    body = response.json()
    assert body["error"] == "not_found" and body.get("field") == field, body


def test_a_post_to_a_malformed_id_is_a_json_404_not_the_csrf_page() -> None:
    response = Client(enforce_csrf_checks=True).post("/api/v1/submissions/nope/withdraw", b"{}", "application/json")
    assert response.status_code == 404 and response.json()["field"] == "id"


def test_a_missing_slash_says_where_the_endpoint_is(client: Client) -> None:
    body = client.get("/api/v1/leaderboard").json()
    assert body["did_you_mean"] == "/api/v1/leaderboard/"
    assert "did_you_mean" not in client.get("/api/v1/leader").json()


def test_the_api_docs_show_real_examples(client: Client) -> None:
    schema = client.get("/api/v1/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json").json()
    text = str(schema)
    assert "api.example.org/accounts" not in text  # DRF's cursor example
    post = schema["paths"]["/api/v1/submissions/"]["post"]["requestBody"]["content"]["application/json"]
    [example] = post["examples"].values()
    assert example["value"]["payloadType"] == "application/vnd.benchhub.submission.v1+json"
    board = schema["paths"]["/api/v1/leaderboard/"]["get"]["responses"]["200"]["content"]["application/json"]
    [cell] = board["examples"].values()
    assert cell["value"]["rows"][0]["baseline_tg_tps"] == 148.0


def test_the_request_examples_are_the_protocol_vectors_envelopes() -> None:
    import json
    from pathlib import Path

    vector = json.loads((Path(__file__).parents[1] / "vectors" / "protocol-vector.json").read_text())
    from benchhub.api.examples import ENVELOPES

    assert ENVELOPES["registration"] == vector["registration_envelope"]
    assert ENVELOPES["submission"] == vector["submission_envelope"]


def test_a_host_not_served_is_a_json_400_under_the_api(client: Client) -> None:
    response = client.get("/api/v1/", HTTP_HOST="evil.example")
    assert response.status_code == 400 and response["Content-Type"] == "application/json"
    assert response.json()["error"] == "bad_request"
    assert "json" not in client.get("/", HTTP_HOST="evil.example")["Content-Type"]


def test_the_examples_have_the_fields_their_serializers_have() -> None:
    """An example that lost a field, or kept one the API no longer has, is junk again."""
    from benchhub.api import examples, serializers

    def fields(serializer: Any) -> set[str]:
        return set(serializer().fields)

    assert set(examples.CREATED[0].value) == fields(serializers.SubmissionCreatedSerializer)
    assert set(examples.REFERENCE_ROW[0].value) == fields(serializers.ReferenceRowSerializer)
    assert set(examples.MEASUREMENT[0].value) == fields(serializers.MeasurementSerializer)
    [row] = examples.LEADERBOARD[0].value["rows"]
    assert set(row) == fields(serializers.LeaderboardRowSerializer)
    assert set(row["excluded"]) == fields(serializers.ExcludedSerializer)
