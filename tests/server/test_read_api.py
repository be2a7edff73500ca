"""docs/protocol.md section 6 reads: leaderboard, submissions, campaigns and manifest, measurements,
CSV, the OpenAPI schema, and JSON errors."""

from __future__ import annotations

import hashlib
import io
from pathlib import Path
from typing import Any

import pytest
from benchhub_protocol import envelope
from django.db import connection
from django.test import Client

from benchhub.results import cells
from benchhub.results.models import Submission
from tests.conftest import PATCH_TEXT, Api, build_payload, persona, read_csv

pytestmark = pytest.mark.django_db

ROW_KEYS = {
    "chip",
    "gpu_cores",
    "quant",
    "variant",
    "batch_size",
    "baseline_tg_tps",
    "tg_tps",
    "speedup",
    "interval",
    "ci_low",
    "ci_high",
    "verdict",
    "model",
    "model_sha256",
    "n_machines",
    "n_submissions",
    "n_contributors",
    "excluded",
}


@pytest.fixture
def two_submissions(api: Api, ada: envelope.Signer) -> list[str]:
    ids = []
    for options in (
        {},
        {
            "machine": {"chip": "Apple M1", "gpu_cores": 8},
            "model": {"file_type": "IQ3_XXS", "sha256": "e" * 64},
            "tg": {"upstream": {1: [70, 70], 4: [71.5, 71.5]}, "01": {1: [70, 70], 4: [90.3, 90.3]}},
        },
    ):
        response = api.submit(build_payload(**options), ada)
        assert response.status_code == 201
        ids.append(response.json()["id"])
        cells.refresh_submission_cells(ids[-1])
    return ids


def test_it_serves_the_leaderboard_rows_protocol_section_5_names(client: Client, two_submissions: list[str]) -> None:
    body = client.get("/api/v1/leaderboard/", {"campaign": "mv-ext-iquants", "quant": "IQ2_XXS"}).json()
    assert (body["campaign"], body["baseline"]) == ("mv-ext-iquants", "upstream")
    row = next(r for r in body["rows"] if r["variant"] == "01" and r["batch_size"] == 4)
    assert set(row) >= ROW_KEYS
    assert (row["chip"], row["gpu_cores"], row["quant"]) == ("Apple M5 Pro", 20, "IQ2_XXS")
    assert row["speedup"] == pytest.approx(210 / 148)
    assert (row["n_submissions"], row["n_contributors"]) == (1, 1)
    assert {r["quant"] for r in body["rows"]} == {"IQ2_XXS"}
    by_chip = client.get("/api/v1/leaderboard/", {"campaign": "mv-ext-iquants", "chip": "Apple M1", "batch_size": 4})
    assert {(r["chip"], r["batch_size"]) for r in by_chip.json()["rows"]} == {("Apple M1", 4)}


def test_it_names_the_missing_or_malformed_leaderboard_parameter(client: Client, campaign: Any) -> None:
    assert client.get("/api/v1/leaderboard/").json()["field"] == "campaign"
    bad = client.get("/api/v1/leaderboard/", {"campaign": "mv-ext-iquants", "batch_size": "four"})
    assert (bad.status_code, bad.json()["field"]) == (400, "batch_size")
    unknown = client.get("/api/v1/leaderboard/", {"campaign": "nope"})
    assert (unknown.status_code, unknown.json()["field"]) == (400, "campaign")
    assert campaign.slug in unknown.json()["known"]


def test_it_lists_submissions_with_a_cursor_and_filters(client: Client, two_submissions: list[str]) -> None:
    first = client.get("/api/v1/submissions/", {"page_size": 1}).json()
    assert [s["id"] for s in first["results"]] == [two_submissions[1]]
    second = client.get(first["next"]).json()
    assert [s["id"] for s in second["results"]] == [two_submissions[0]]
    assert second["next"] is None
    only_m1 = client.get("/api/v1/submissions/", {"chip": "Apple M1"}).json()["results"]
    assert [s["id"] for s in only_m1] == [two_submissions[1]]
    by_contributor = client.get("/api/v1/submissions/", {"contributor": "ADA", "quant": "IQ2_XXS", "variant": "01"})
    assert [s["id"] for s in by_contributor.json()["results"]] == [two_submissions[0]]


def test_it_shows_a_submission_with_its_variants_checks_and_measurements(
    client: Client, two_submissions: list[str]
) -> None:
    body = client.get(f"/api/v1/submissions/{two_submissions[0]}/").json()
    assert body["contributor"] == "ada" and body["campaign"] == "mv-ext-iquants"
    assert [v["name"] for v in body["variants"]] == ["upstream", "01"]
    assert body["variants"][1]["correctness"][0]["status"] == "pass"
    assert len(body["measurements"]) == 4
    assert body["envelope_url"].endswith(f"/api/v1/submissions/{two_submissions[0]}/envelope")


def test_it_exports_measurements_as_csv(client: Client, two_submissions: list[str]) -> None:
    response = client.get("/api/v1/measurements.csv", {"chip": "Apple M5 Pro"})
    assert response["Content-Type"].startswith("text/csv")
    rows = read_csv(b"".join(response.streaming_content).decode())
    assert len(rows) == 4
    assert {row["submission"] for row in rows} == {two_submissions[0]}
    row = next(r for r in rows if r["variant"] == "01" and r["batch_size"] == "4")
    assert row["speedup"] == f"{210 / 148:.4f}"  # rounded to what was measured (docs/api.md)


def test_it_lists_measurements_with_a_cursor(client: Client, two_submissions: list[str]) -> None:
    body = client.get("/api/v1/measurements/", {"quant": "IQ3_XXS", "variant": "01"}).json()
    assert {(m["chip"], m["batch_size"]) for m in body["results"]} == {("Apple M1", 1), ("Apple M1", 4)}


def test_it_serves_the_manifest_with_patch_hashes_and_download_urls(client: Client, campaign: Any) -> None:
    manifest = client.get("/api/v1/campaigns/mv-ext-iquants/").json()
    assert manifest["repo"] == "https://github.com/ggml-org/llama.cpp" and manifest["baseline"] == "upstream"
    assert [v["name"] for v in manifest["variants"]] == ["upstream", "01", "01+02"]
    assert all(
        v["available"] and v["commit"] == "0c1e57098bba43ac29e6e3b677cdceebdd22334f" for v in manifest["variants"]
    )
    patch = manifest["variants"][2]["patches"][1]
    assert patch["sha256"] == hashlib.sha256(PATCH_TEXT["02-vectorized-bs1.patch"]).hexdigest()
    assert patch["url"] == "http://testserver/api/v1/campaigns/mv-ext-iquants/patches/02-vectorized-bs1.patch"
    download = client.get(patch["url"])
    assert b"".join(download.streaming_content) == PATCH_TEXT["02-vectorized-bs1.patch"]
    assert manifest["sweep"]["batch_sizes"] == [1, 2, 3, 4, 5, 8, 9, 12, 16] and manifest["sweep"]["extra_args"] == []
    assert manifest["variants"][2]["env"]["GGML_METAL_MV_IQ2_S_VEC"] == "1"
    assert [c["slug"] for c in client.get("/api/v1/campaigns/").json()] == ["few-row-mma", "mv-ext-iquants"]


def test_it_marks_variants_unavailable_while_a_patch_is_missing_or_empty(
    client: Client, campaign: Any, patches_dir: Path
) -> None:
    (patches_dir / "02-vectorized-bs1.patch").unlink()
    (patches_dir / "01-mv-ext-iquants.patch").write_bytes(b"")
    variants = client.get("/api/v1/campaigns/mv-ext-iquants/").json()["variants"]
    assert [v["available"] for v in variants] == [True, False, False]
    assert "empty" in variants[1]["unavailable_reason"]
    assert "not published" in variants[2]["unavailable_reason"]
    signed = hashlib.sha256(PATCH_TEXT["01-mv-ext-iquants.patch"]).hexdigest()  # what the version signed stays
    assert variants[1]["patches"][0] == {"name": "01-mv-ext-iquants.patch", "sha256": signed, "url": None}
    missing = client.get("/api/v1/campaigns/mv-ext-iquants/patches/02-vectorized-bs1.patch")
    assert (missing.status_code, missing.json()["error"]) == (404, "patch_unavailable")
    assert client.get("/api/v1/campaigns/mv-ext-iquants/patches/..%2Fsettings.py").status_code == 404


def test_it_publishes_the_openapi_schema_and_a_docs_page(client: Client) -> None:
    schema = client.get("/api/v1/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json").json()
    for path in ("/api/v1/submissions/", "/api/v1/contributors/", "/api/v1/leaderboard/", "/api/v1/campaigns/{slug}/"):
        assert path in schema["paths"]
    assert "413" in schema["paths"]["/api/v1/submissions/"]["post"]["responses"]
    docs = client.get("/api/v1/docs/")
    assert docs.status_code == 200 and b"api/v1/schema" in client.get("/api/v1/docs/?script").content
    assert b"/static/drf_spectacular_sidecar/swagger-ui-dist" in docs.content, "served locally, not from a CDN"


def test_it_answers_unknown_api_paths_with_json(client: Client) -> None:
    response = client.get("/api/v1/no-such-thing/")
    assert response.status_code == 404
    assert response.json()["error"] == "not_found"
    assert client.get("/api/v1/submissions/00000000-0000-0000-0000-000000000000/").json()["error"] == "not_found"


def test_it_leaves_hidden_submissions_out_of_lists(client: Client, two_submissions: list[str]) -> None:

    Submission.objects.filter(pk=two_submissions[0]).update(hidden=True)
    listed = [s["id"] for s in client.get("/api/v1/submissions/").json()["results"]]
    assert listed == [two_submissions[1]]
    assert persona("ada").keyid == client.get(f"/api/v1/submissions/{two_submissions[0]}/").json()["keyid"]


def test_it_answers_a_server_error_under_the_api_with_json_and_elsewhere_with_the_page(rf: Any) -> None:
    from benchhub.api import errors

    api_error = errors.server_error(rf.get("/api/v1/leaderboard/"))
    assert api_error.status_code == 500 and api_error["Content-Type"] == "application/json"
    assert b'"error": "server_error"' in api_error.content
    page_error = errors.server_error(rf.get("/"))
    assert page_error.status_code == 500 and not page_error["Content-Type"].startswith("application/json")


def test_it_syncs_campaign_rows_from_the_shipped_definition_idempotently(campaign: Any) -> None:
    from benchhub_protocol import campaign_versions
    from django.core.management import call_command

    from benchhub.results.models import Campaign

    Campaign.objects.update(title="stale", baseline="stale")
    for _ in range(2):
        call_command("sync_campaigns", stdout=io.StringIO())
    rows = {row.slug: row for row in Campaign.objects.all()}
    shipped = {
        slug: campaign_versions.signed_body(found[-1]) for slug, found in campaign_versions.bundled_versions().items()
    }
    assert set(rows) == set(shipped) == {"mv-ext-iquants", "few-row-mma"}
    for slug, row in rows.items():
        assert (row.title, row.baseline, row.definition) == (
            shipped[slug]["title"],
            shipped[slug]["baseline"],
            shipped[slug],
        )


def test_it_keeps_each_submissions_cell_group_and_lists_a_chip_and_quant_from_one_index_range(
    client: Client, two_submissions: list[str]
) -> None:
    for submission in Submission.objects.select_related("machine", "model_file"):
        assert (submission.chip, submission.gpu_cores, submission.quant) == (
            submission.machine.chip,
            submission.machine.gpu_cores,
            submission.model_file.file_type,
        )
    listed = Submission.objects.public().filter(chip="Apple M1", quant="IQ3_XXS").order_by("-received_at", "-id")
    with connection.cursor() as cursor:
        # A two-row table, where every plan costs about the same: ask whether the index can serve the
        # list in order (with sorts and scans priced out, a plan that still sorts could not).
        cursor.execute("SET LOCAL enable_seqscan = off")
        cursor.execute("SET LOCAL enable_sort = off")
        sql, params = listed[:50].query.sql_with_params()
        cursor.execute("EXPLAIN " + sql, params)
        plan = "\n".join(row[0] for row in cursor.fetchall())
    assert "submission_chip_quant_newest" in plan
    assert "Sort" not in plan, "newest first straight from the index, not sorted after"
