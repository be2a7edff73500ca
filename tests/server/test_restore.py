"""Issue 46, point 5: a service rebuilt from its own public snapshot. The recompute scenario's history
(withdrawals, hidden and held rows, quarantine released, a model conflict, probation, two campaign
versions, a control page) on PostgreSQL, its snapshot, and a fresh database restored from it in
another process (the embedded SQLite default: the snapshot is the only thing they share). The
restored service serves the same rows and states, and the standalone recompute agrees with it on
every cell."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from django.core.management import CommandError, call_command
from django.test import Client

from tests.conftest import Api, publish_snapshot
from tests.recompute.scenario import PROBATION_S, populate
from tests.server.sqlite_process import run_on_fresh_sqlite

# Row fields compared; every one a page shows.
FIELDS = (
    "chip", "gpu_cores", "model", "model_sha256", "quant", "variant", "commit", "batch_size", "baseline_tg_tps",
    "tg_tps", "speedup", "ci_low", "ci_high", "predict_low", "predict_high", "verdict", "n_machines",
    "n_submissions", "n_contributors", "n_pending", "excluded", "campaign_version", "superseded",
)  # fmt: skip

RESTORE = """
import django, json
django.setup()
from django.conf import settings
settings.BENCHHUB_KEY_PROBATION_S = {probation}
from django.core.management import call_command
from django.test import Client
from tests.recompute.builder import load_script
call_command("migrate", verbosity=0)
call_command("restore_snapshot", {snapshot!r})
call_command("write_snapshot")
client = Client()
rc = load_script()
snapshot = rc.parse_snapshot(b"".join(client.get("/api/v1/snapshot/").streaming_content))
boards = rc.recompute(snapshot)
total = differ = 0
found = []
rows = {{}}
for slug, recomputed in boards.items():
    live = client.get("/api/v1/leaderboard/", {{"campaign": slug}}).json()["rows"]
    rows[slug] = live
    seen, bad, lines = rc.compare(slug, recomputed, live)
    total, differ, found = total + seen, differ + bad, found + lines
listed = client.get("/api/v1/submissions/", {{"page_size": 500}}).json()["results"]
states = {{s["id"]: [s["status"], s["state"], s["state_reason"]] for s in listed}}
print(json.dumps({{"cells": total, "differ": differ, "lines": found[:20], "failures": snapshot.failures,
                  "rows": rows, "states": states}}))
"""


def _value(value: Any) -> str:
    # PostgreSQL and SQLite sum in their own order: the last bits of a float may differ.
    return f"{value:.10g}" if isinstance(value, float) else json.dumps(value, sort_keys=True)


def _board(rows: list[dict[str, Any]]) -> list[tuple[str, ...]]:
    return sorted(tuple(_value(row.get(name)) for name in FIELDS) for row in rows)


@pytest.mark.django_db(transaction=True)
def test_a_fresh_service_restored_from_the_snapshot_shows_the_same_cells(
    api: Api, campaign: Any, settings: Any, tmp_path: Path, client: Client
) -> None:
    settings.BENCHHUB_KEY_PROBATION_S = PROBATION_S
    populate(api)
    publish_snapshot()
    [snapshot] = Path(settings.BENCHHUB_SNAPSHOT_DIR).glob("benchhub-snapshot-*.jsonl.gz")
    original = {
        slug: client.get("/api/v1/leaderboard/", {"campaign": slug}).json()["rows"]
        for slug in ("mv-ext-iquants", "few-row-mma")
    }
    states = {
        s["id"]: [s["status"], s["state"], s["state_reason"]]
        for s in client.get("/api/v1/submissions/", {"page_size": 500}).json()["results"]
    }
    assert {"counted", "hidden", "withdrawn"} <= {state for _, state, _ in states.values()}
    assert any("model_conflict" in reason for _, _, reason in states.values()), "the history has a held claim"
    (tmp_path / "restored").mkdir()
    report = run_on_fresh_sqlite(
        tmp_path / "restored", RESTORE.format(probation=PROBATION_S, snapshot=str(snapshot)), timeout=600
    )
    assert report["failures"] == []
    assert report["cells"] > 40 and report["differ"] == 0, json.dumps(report["lines"], indent=1)
    for slug, rows in original.items():
        assert _board(report["rows"][slug]) == _board(rows), slug
    assert report["states"] == states


@pytest.mark.django_db
def test_it_restores_only_into_an_empty_database(api: Api, ada: Any, tmp_path: Path) -> None:
    empty = tmp_path / "empty.jsonl"
    empty.write_text('{"kind": "snapshot"}\n')
    with pytest.raises(CommandError, match="empty one"):
        call_command("restore_snapshot", str(empty))
    with pytest.raises(CommandError, match="is not a file"):
        call_command("restore_snapshot", str(tmp_path / "missing.jsonl.gz"))


@pytest.mark.django_db(transaction=True)
def test_a_hand_edited_snapshot_is_one_sentence_and_restores_nothing(tmp_path: Path) -> None:
    """A record that lacks a field or holds one of the wrong shape names its line; nothing is written."""
    from benchhub.accounts.models import Contributor

    key = {"keyid": "0" * 64, "public_key": "AAAA", "registered_at": "2026-12-01T00:00:00Z"}
    cases = {
        '{"kind": "contributor", "keys": []}': "line 2 of bad.jsonl \\(contributor record\\) lacks the field 'handle'",
        '{"kind": "contributor", "handle": "ada", "keys": 7}': "line 2 .* wrong type",
        '{"kind": "contributor", "handle": "ada", "keys": [{"keyid": "x"}]}': "lacks the field 'public_key'",
        '{"kind": "submission", "id": "not-a-uuid"}': "line 2 .* lacks the field 'envelope'",
        '{"kind": "campaign", "manifest": null}': "line 2 .* wrong type",
        '{"kind": "model_name", "sha256": "ab"}': "model_name record of bad.jsonl lacks the field 'name'",
        json.dumps({"kind": "contributor", "handle": "ada", "keys": [key]}): "is not the keyid of its public key",
    }
    for line, message in cases.items():
        bad = tmp_path / "bad.jsonl"
        bad.write_text('{"kind": "snapshot"}\n' + line + "\n")
        with pytest.raises(CommandError, match=message):
            call_command("restore_snapshot", str(bad))
        assert not Contributor.objects.exists(), line
