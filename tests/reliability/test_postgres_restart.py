"""Issue 7, item 6: PostgreSQL restarted under load, once shut down cleanly (`pg_ctl -m fast`) and
once crashed (`-m immediate`: no shutdown checkpoint; the restart replays the WAL). The agent's
outbox retries; every submission the server acknowledged is stored; gunicorn and the Celery worker
recover without a restart; the cells catch up, including the refresh the outage broke.

The server goes down just after an acknowledgment while that machine's cells still owe a refresh
(queued or running, so the outage breaks it), and from then on the agent uploads from a second
machine (another cell group): no later submission queues the first group again, and its cells catch
up only if the broken refresh is done again (the sweeper). Runs on a cluster of its own (never the
machine's). BENCHHUB_PG_DOWN_S sets the outage (default 5)."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import psycopg
import pytest
import requests
from benchhub_agent import client, keys, outbox
from benchhub_agent.dirs import home
from benchhub_agent.errors import AgentError

from tests.conftest import build_payload, signed_submission
from tests.reliability.faults import ROOT, OwnPostgres, Stack, start_web, wait_for

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]
DOWN_S = float(os.environ.get("BENCHHUB_PG_DOWN_S", "5"))
CHIP_BEFORE, CHIP_AFTER = "Apple M1", "Apple M2"  # the machine uploading before and after the stop
SUBMISSION_CHIPS = "FROM results_submission s JOIN results_machine m ON m.id = s.machine_id"


def connect(database: OwnPostgres) -> psycopg.Connection[Any]:
    return psycopg.connect(database.url.replace("postgres://", "postgresql://"), autocommit=True)


def stored_chips(database: OwnPostgres) -> dict[str, str]:
    """Each stored submission's id and the chip it was measured on."""
    with connect(database) as connection:
        return {str(row[0]): row[1] for row in connection.execute(f"SELECT s.id, m.chip {SUBMISSION_CHIPS}")}


def refreshes_owed(connection: psycopg.Connection[Any], chip: str) -> int:
    """How many of the chip's stored submissions the cells do not count yet."""
    query = f"SELECT count(*) {SUBMISSION_CHIPS} WHERE m.chip = %s AND s.cells_refreshed_at IS NULL"
    row = connection.execute(query, (chip,)).fetchone()
    return int(row[0]) if row else 0


def leaderboard(stack: Stack) -> list[dict[str, Any]]:
    rows = requests.get(f"{stack.base}/api/v1/leaderboard/", params={"campaign": "mv-ext-iquants"}, timeout=10)
    values = [{name: value for name, value in row.items() if name != "updated_at"} for row in rows.json()["rows"]]
    return sorted(values, key=lambda r: (r["chip"], r["quant"], r["variant"], r["batch_size"]))


def counted_per_chip(stack: Stack) -> dict[str, int]:
    """How many submissions the served cells count per chip (every cell of a group counts them all)."""
    return {
        row["chip"]: row["n_submissions"]
        for row in leaderboard(stack)
        if (row["variant"], row["batch_size"]) == ("01", 1)
    }


@pytest.mark.parametrize("mode", [pytest.param("fast", id="clean-stop"), pytest.param("immediate", id="crash")])
def test_it_keeps_every_acknowledged_submission_across_a_postgres_restart(
    fault_stack: Stack, own_postgres: OwnPostgres, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mode: str
) -> None:
    fault_stack.env["DATABASE_URL"] = own_postgres.url
    start_web(fault_stack)
    fault_stack.start("worker")
    fault_stack.start("beat")
    monkeypatch.setenv("BENCHHUB_HOME", str(tmp_path / "agent"))
    dirs = home()
    signer = keys.load_or_create(dirs)
    keys.register(dirs, fault_stack.base, "ada", signer)
    acknowledged: set[str] = set()
    failed_sends: list[str] = []
    done = threading.Event()
    stopping = threading.Event()
    just_acknowledged = threading.Event()
    acknowledged_at = 0.0

    def agent_uploads() -> None:
        nonlocal acknowledged_at
        while not done.is_set():
            payload = build_payload(machine={"chip": CHIP_AFTER if stopping.is_set() else CHIP_BEFORE})
            queued = outbox.put(dirs, payload["nonce"], signed_submission(payload, signer))
            try:
                acknowledged.add(outbox.send(queued, fault_stack.base, dirs)["id"])
            except AgentError as error:  # stays in the outbox for `benchhub-agent upload`
                failed_sends.append(error.message)
            else:
                acknowledged_at = time.monotonic()
                just_acknowledged.set()
            time.sleep(0.2)

    monkeypatch.setattr(client, "TIMEOUT_S", 10)
    uploader = threading.Thread(target=agent_uploads, daemon=True)
    uploader.start()
    time.sleep(5)
    # The worker is consuming (a first refresh is served), so what the outage breaks is a refresh in flight.
    wait_for(lambda: CHIP_BEFORE in counted_per_chip(fault_stack), 120, "the worker to refresh a first submission")
    with connect(own_postgres) as watcher:

        def acknowledged_with_a_refresh_owed() -> int:
            just_acknowledged.clear()
            return refreshes_owed(watcher, CHIP_BEFORE) if just_acknowledged.wait(30) else 0

        owed = wait_for(acknowledged_with_a_refresh_owed, 120, "an acknowledgment with a refresh owed", interval=0)
        stopping.set()
    since_acknowledgment = time.monotonic() - acknowledged_at
    own_postgres.shut_down_now(mode)
    stopped_at = time.monotonic()
    time.sleep(DOWN_S)
    own_postgres.start()
    back_at = time.monotonic()
    time.sleep(10)
    done.set()
    uploader.join(timeout=120)
    print(
        f"PostgreSQL shut down ({mode}) {since_acknowledgment * 1000:.1f} ms after an acknowledgment, {owed}"
        f" submission(s) of {CHIP_BEFORE} waiting for their refresh; down {back_at - stopped_at:.1f} s;"
        f" {len(acknowledged)} acknowledged; failed sends {failed_sends}"
    )
    upload = subprocess.run(
        [sys.executable, "-m", "benchhub_agent", "upload", "--server", fault_stack.base],
        env={**os.environ, "BENCHHUB_HOME": str(tmp_path / "agent")},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert upload.returncode == 0, upload.stdout + upload.stderr
    assert outbox.pending(dirs) == []
    stored = stored_chips(own_postgres)
    missing = acknowledged - set(stored)
    assert not missing, f"{len(missing)} acknowledged submission(s) missing after the restart: {sorted(missing)}"
    assert len(stored) == len(acknowledged) + len(failed_sends)
    per_chip = dict(Counter(stored.values()))
    assert set(per_chip) == {CHIP_BEFORE, CHIP_AFTER}
    try:
        wait_for(lambda: counted_per_chip(fault_stack) == per_chip, 120, "the cells to count every stored submission")
    except AssertionError as error:
        raise AssertionError(f"{error}: the cells count {counted_per_chip(fault_stack)}, stored {per_chip}") from None
    served = leaderboard(fault_stack)
    rebuild = subprocess.run(
        [sys.executable, "manage.py", "rederive_measurements"],
        cwd=ROOT,
        env=fault_stack.env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert rebuild.returncode == 0, rebuild.stderr
    assert served == leaderboard(fault_stack)
    assert "worker" in fault_stack.processes and fault_stack.processes["worker"].poll() is None
    assert fault_stack.processes["web"].poll() is None
