"""Issue 26's API reads: chip by the site's slug, quant in any case, unknown parameters refused by
name, the published rows, and the CSV's extra columns with floats rounded to what was measured."""

from __future__ import annotations

import pytest
from django.test import Client

from benchhub.results.models import LeaderboardCell, Submission
from tests.conftest import read_csv

pytestmark = pytest.mark.django_db
LEADERBOARD = "/api/v1/leaderboard/"


def _rows(client: Client, **params: str) -> list[dict[str, object]]:
    response = client.get(LEADERBOARD, {"campaign": "mv-ext-iquants", **params})
    assert response.status_code == 200, response.content
    rows: list[dict[str, object]] = response.json()["rows"]
    return rows


def test_it_takes_the_chip_by_name_or_by_the_sites_slug(client: Client, small_site: list[Submission]) -> None:
    by_name = _rows(client, chip="Apple M5 Pro")
    assert by_name and _rows(client, chip="apple-m5-pro-20c") == by_name
    assert _rows(client, chip="apple-m5-pro") == by_name  # every binning of the chip: here one
    unknown = client.get(LEADERBOARD, {"campaign": "mv-ext-iquants", "chip": "apple-m5-pro-99c"})  # issue 30
    assert (unknown.status_code, unknown.json()["field"], unknown.json()["value"]) == (400, "chip", "apple-m5-pro-99c")
    assert unknown.json()["did_you_mean"][0] == "apple-m5-pro-20c"
    listed = client.get("/api/v1/submissions/", {"chip": "apple-m1-8c"}).json()["results"]
    assert len(listed) == 2 and {s["machine"]["chip"] for s in listed} == {"Apple M1"}


def test_it_matches_the_quant_in_any_case(client: Client, small_site: list[Submission]) -> None:
    upper = _rows(client, quant="IQ2_XXS")
    assert upper and _rows(client, quant="iq2_xxs") == upper
    measured = client.get("/api/v1/measurements/", {"quant": "iq3_xxs"}).json()["results"]
    assert measured and {row["quant"] for row in measured} == {"IQ3_XXS"}


@pytest.mark.parametrize(
    "url",
    [
        LEADERBOARD + "?campaign=mv-ext-iquants",
        "/api/v1/submissions/?",
        "/api/v1/measurements/?",
        "/api/v1/measurements.csv?",
    ],
)
def test_it_refuses_an_unknown_parameter_by_name(client: Client, small_site: list[Submission], url: str) -> None:
    response = client.get(url + "&qaunt=IQ2_XXS")
    assert response.status_code == 400
    assert response["Content-Type"].startswith("application/json")
    body = response.json()
    assert (body["error"], body["field"]) == ("unknown_parameter", "qaunt")
    assert "qaunt" in body["detail"]


def test_it_still_takes_the_pagination_parameters(client: Client, small_site: list[Submission]) -> None:
    page = client.get("/api/v1/submissions/", {"page_size": 1}).json()
    assert len(page["results"]) == 1 and page["next"]
    assert client.get(page["next"]).status_code == 200


def test_it_lists_the_published_reference_rows(client: Client, small_site: list[Submission]) -> None:
    rows = client.get("/api/v1/reference-rows/", {"chip": "apple-m5-pro-20c", "quant": "iq2_xxs"}).json()
    bs4 = next(row for row in rows if row["batch_size"] == 4)
    assert (bs4["baseline_tg_tps"], bs4["tg_tps"], bs4["machine"], bs4["signed"]) == (
        148.0,
        209.9,
        "M5 Pro 24GB",
        False,
    )
    assert bs4["source_url"].startswith("https://github.com/ggml-org/llama.cpp/pull/")
    assert client.get("/api/v1/reference-rows/", {"campaign": "few-row-mma"}).json()
    assert client.get("/api/v1/reference-rows/", {"nope": "1"}).status_code == 400


def test_it_writes_the_csv_with_model_date_demo_checks_verdict_and_rounded_floats(
    client: Client, small_site: list[Submission]
) -> None:
    response = client.get("/api/v1/measurements.csv", {"chip": "apple-m1-8c", "quant": "iq3_xxs"})
    rows = read_csv(b"".join(response.streaming_content).decode())  # type: ignore[attr-defined]
    assert rows
    for column in (
        "model",
        "model_sha256",
        "received_at",
        "demo",
        "correctness_status",
        "degenerate",
        "verdict",
        "interval",
    ):
        assert column in rows[0], column
    degenerate = {row["variant"]: row["degenerate"] for row in rows}
    assert degenerate == {"upstream": "false", "01": "true", "01+02": "false"}  # chen's 01 output loops
    row = next(r for r in rows if r["variant"] == "01+02" and r["batch_size"] == "8")
    assert row["model"] == "Qwen3-1.7B IQ3_XXS" and row["demo"] == "true" and row["correctness_status"] == "pass"
    assert len(row["tg_tps"].split(".")[1]) == 2 and len(row["speedup"].split(".")[1]) == 4
    cell = LeaderboardCell.objects.get(chip="Apple M1", quant="IQ3_XXS", variant="01+02", batch_size=8)
    assert (row["verdict"], row["interval"]) == (cell.verdict, cell.interval or "")
    assert row["received_at"].startswith("20") and "T" in row["received_at"]
