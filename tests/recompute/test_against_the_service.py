"""The standalone script recomputes every cell the service serves, field for field, on PostgreSQL
(a live server over HTTP) and on the embedded SQLite default (in a fresh process), after a history
that exercises every rule of cells v3 (tests/recompute/scenario.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Api, publish_snapshot
from tests.recompute.builder import load_script
from tests.recompute.scenario import PROBATION_S, populate
from tests.server.sqlite_process import run_on_fresh_sqlite


def covers_every_rule(boards: dict[str, list[dict[str, Any]]]) -> None:
    """The history reached what it claims to: each rule shows in at least one recomputed cell."""
    rows = [row for board in boards.values() for row in board]
    assert any(row["n_pending"] for row in rows)
    assert any(row["control"] for row in rows) and any(not row["control"] for row in rows)
    pinned = {(row["commit"], row["superseded"]) for row in boards["few-row-mma"] if row["variant"] == "pr-29869"}
    assert pinned == {("1" * 40, True), ("2" * 40, False)}  # the older version's cells kept, apart
    for reason in load_script().REASONS:
        assert any(row["excluded"][reason] for row in rows), reason
    named = {(row["model"], row["model_sha256"]) for row in rows}
    assert len({sha for model, sha in named if model == "Qwen3-1.7B UD-IQ2_XXS"}) >= 2
    assert {row["verdict"] for row in rows} >= {"too few machines", "faster", "within"}
    assert any(row["n_contributors"] < row["n_machines"] for row in rows)  # a handle with several keys


@pytest.mark.django_db(transaction=True)
def test_it_agrees_with_the_live_service_on_every_cell(
    api: Api, campaign: Any, live_server: Any, settings: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    settings.BENCHHUB_KEY_PROBATION_S = PROBATION_S
    populate(api)
    publish_snapshot()
    script = load_script()
    code = script.main(["--server", live_server.url])
    report = capsys.readouterr().out.strip().splitlines()
    cells, differ = report[-1].split(" cells, ")
    assert code == 0 and differ == "0 differ", "\n".join(report[-30:])
    assert int(cells) > 40
    covers_every_rule(script.recompute(script.parse_snapshot(script.download_snapshot(live_server.url))))


def test_it_agrees_with_the_embedded_sqlite_default(tmp_path: Path) -> None:
    script = f"""
import django, json, gzip
django.setup()
from django.conf import settings
settings.BENCHHUB_KEY_PROBATION_S = {PROBATION_S}
from django.core.management import call_command
call_command("migrate", verbosity=0)
from django.test import Client
from tests.conftest import Api, publish_snapshot
from tests.recompute.builder import load_script
from tests.recompute.scenario import populate
client = Client()
populate(Api(client))
call_command("write_snapshot")
rc = load_script()
snapshot = rc.parse_snapshot(b"".join(client.get("/api/v1/snapshot/").streaming_content))
boards = rc.recompute(snapshot)
total = differ = 0
lines = []
for slug, rows in boards.items():
    live = client.get("/api/v1/leaderboard/", {{"campaign": slug}}).json()["rows"]
    seen, bad, found = rc.compare(slug, rows, live)
    total, differ, lines = total + seen, differ + bad, lines + found
print(json.dumps({{"cells": total, "differ": differ, "lines": lines[:20], "failures": snapshot.failures}}))
"""
    report = run_on_fresh_sqlite(tmp_path, script, timeout=300)
    assert report["failures"] == []
    assert report["cells"] > 40 and report["differ"] == 0, json.dumps(report["lines"], indent=1)
