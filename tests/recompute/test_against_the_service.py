"""The standalone script recomputes every cell the service serves, on PostgreSQL (a live server
over HTTP) and on the embedded SQLite default (in a fresh process)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Api
from tests.recompute.builder import load_script
from tests.recompute.scenario import populate
from tests.server.sqlite_process import run_on_fresh_sqlite


@pytest.mark.django_db(transaction=True)
def test_it_agrees_with_the_live_service_on_every_cell(
    api: Api, campaign: Any, live_server: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    populate(api)
    assert load_script().main(["--server", live_server.url]) == 0
    summary = capsys.readouterr().out.strip().splitlines()[-1]
    cells, differ = summary.split(" cells, ")
    assert int(cells) > 20 and differ == "0 differ", summary


def test_it_agrees_with_the_embedded_sqlite_default(tmp_path: Path) -> None:
    script = """
import django, json, gzip
django.setup()
from django.core.management import call_command
call_command("migrate", verbosity=0)
from django.test import Client
from tests.conftest import Api
from tests.recompute.builder import load_script
from tests.recompute.scenario import populate
client = Client()
populate(Api(client))
rc = load_script()
snapshot = rc.parse_snapshot(b"".join(client.get("/api/v1/snapshot/").streaming_content))
boards = rc.recompute(snapshot)
total = differ = 0
lines = []
for slug, rows in boards.items():
    live = client.get("/api/v1/leaderboard/", {"campaign": slug}).json()["rows"]
    seen, bad, found = rc.compare(slug, rows, live)
    total, differ, lines = total + seen, differ + bad, lines + found
print(json.dumps({"cells": total, "differ": differ, "lines": lines[:20], "failures": snapshot.failures}))
"""
    report = run_on_fresh_sqlite(tmp_path, script, timeout=300)
    assert report["failures"] == []
    assert report["cells"] > 20 and report["differ"] == 0, json.dumps(report["lines"], indent=1)
