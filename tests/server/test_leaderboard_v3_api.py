"""The API and the CSV speak cells v3 (docs/protocol.md section 7): a leaderboard row carries exactly the
protocol's row fields plus backend and control, the OpenAPI document says what each is, and the CSV
names each row's machine (its key), commit and backend, with its own cell's verdict."""

from __future__ import annotations

from typing import Any

import pytest
from benchhub_protocol import envelope
from django.test import Client

from tests.conftest import Api, read_csv
from tests.web import v3_site
from tests.web.v3_site import judge

pytestmark = pytest.mark.django_db

PROTOCOL_ROW_FIELDS = [
    *("chip", "gpu_cores", "model", "model_sha256", "quant", "variant", "commit", "batch_size"),
    *("baseline_tg_tps", "tg_tps", "speedup", "interval", "ci_low", "ci_high"),
    *("predict_low", "predict_high", "predict_level", "tau", "i2", "verdict", "min_effect"),
    *("campaign_version", "superseded"),
    *("n_machines", "n_submissions", "n_contributors", "n_pending", "excluded"),
]
EXCLUDED_REASONS = [
    *("hidden", "withdrawn", "held", "correctness_failed", "correctness_not_run", "degenerate_output", "run_state")
]


@pytest.fixture
def site(api: Api, ada: envelope.Signer, personas: dict[str, envelope.Signer]) -> v3_site.Site:
    return v3_site.build(api, personas)


def test_a_leaderboard_row_carries_exactly_the_protocols_fields(client: Client, site: v3_site.Site) -> None:
    rows = client.get("/api/v1/leaderboard/", {"campaign": "mv-ext-iquants"}).json()["rows"]
    assert rows and all(list(row) == [*PROTOCOL_ROW_FIELDS, "backend", "control"] for row in rows)
    assert all(sorted(row["excluded"]) == sorted(EXCLUDED_REASONS) for row in rows)
    cuda = [row for row in rows if row["backend"] == "cuda"]
    assert cuda and all(row["control"] for row in cuda)
    assert not any(row["control"] for row in rows if row["backend"] == "metal")
    assert {row["min_effect"] for row in rows} == {0.02}
    assert all(len(row["commit"]) == 40 for row in rows)


def test_the_openapi_document_says_what_each_row_field_is(client: Client, campaign: Any) -> None:
    schema = client.get("/api/v1/schema/", {"format": "json"}).json()
    row = schema["components"]["schemas"]["LeaderboardRow"]["properties"]
    assert list(row) == [*PROTOCOL_ROW_FIELDS, "backend", "control"]
    assert [name for name, field in row.items() if not field.get("description")] == []
    verdicts = schema["components"]["schemas"]["VerdictEnum"]["enum"]
    assert verdicts == ["faster", "slower", "varies by machine", "within", "unclear", "too few machines"]
    assert "within ±2%" in row["verdict"]["description"]
    assert "page-wise" in row["interval"]["description"]
    assert "a machine is a registered key" in row["n_machines"]["description"]
    assert "between machines" in row["tau"]["description"] and "I^2" in row["i2"]["description"]


def test_the_csv_names_each_rows_machine_commit_and_backend_with_its_own_cells_verdict(
    client: Client, site: v3_site.Site
) -> None:
    judge({"backend": "metal"}, verdict="faster")
    judge({"backend": "cuda"}, verdict="unclear")
    response = client.get("/api/v1/measurements.csv", {"campaign": "mv-ext-iquants", "variant": "01"})
    rows = read_csv(b"".join(response.streaming_content).decode())
    assert {"machine", "commit", "backend", "verdict", "interval", "min_effect", "control"} <= set(rows[0])
    assert {(row["backend"], row["verdict"], row["control"]) for row in rows} == {
        ("metal", "faster", "false"),
        ("cuda", "unclear", "true"),
    }
    # One machine is one key: the CSV's distinct machines of a cell are its n_machines.
    assert {row["machine"] for row in rows} == {s.key.keyid for s in (site.ada, site.bob, site.twin, site.control)}
    cells = client.get("/api/v1/leaderboard/", {"campaign": "mv-ext-iquants", "variant": "01"}).json()["rows"]
    for cell in cells:
        keyed = (cell["model_sha256"], cell["backend"], str(cell["batch_size"]))
        machines = {row["machine"] for row in rows if (row["model_sha256"], row["backend"], row["batch_size"]) == keyed}
        assert len(machines) == cell["n_machines"]
