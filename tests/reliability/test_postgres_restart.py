"""Issue 7, item 6: PostgreSQL restarted under load. The agent's outbox retries; every submission
the server acknowledged is stored; gunicorn and the Celery worker recover without a restart.
Runs on a cluster of its own (never the machine's). BENCHHUB_PG_DOWN_S sets the outage (default 5)."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import psycopg
import pytest
import requests
from benchhub_agent import client, keys, outbox
from benchhub_agent.dirs import home
from benchhub_agent.errors import AgentError

from tests.conftest import build_payload, submission_envelope
from tests.reliability.faults import ROOT, OwnPostgres, Stack, start_web, wait_for

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]
DOWN_S = float(os.environ.get("BENCHHUB_PG_DOWN_S", "5"))


def stored_ids(database: OwnPostgres) -> set[str]:
    with psycopg.connect(database.url.replace("postgres://", "postgresql://")) as connection:
        return {str(row[0]) for row in connection.execute("SELECT id FROM results_submission")}


def leaderboard(stack: Stack) -> list[dict[str, Any]]:
    rows = requests.get(f"{stack.base}/api/v1/leaderboard/", params={"campaign": "mv-ext-iquants"}, timeout=10)
    values = [{name: value for name, value in row.items() if name != "updated_at"} for row in rows.json()["rows"]]
    return sorted(values, key=lambda r: (r["chip"], r["quant"], r["variant"], r["batch_size"]))


def test_it_keeps_every_acknowledged_submission_across_a_postgres_restart(
    fault_stack: Stack, own_postgres: OwnPostgres, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
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

    def agent_uploads() -> None:
        while not done.is_set():
            payload = build_payload()
            queued = outbox.put(dirs, payload["nonce"], submission_envelope(payload, signer))
            try:
                acknowledged.add(outbox.send(queued, fault_stack.base, dirs)["id"])
            except AgentError as error:  # stays in the outbox for `benchhub-agent upload`
                failed_sends.append(error.message)
            time.sleep(0.2)

    monkeypatch.setattr(client, "TIMEOUT_S", 10)
    uploader = threading.Thread(target=agent_uploads, daemon=True)
    uploader.start()
    time.sleep(5)
    own_postgres.stop("fast")
    stopped_at = time.monotonic()
    time.sleep(DOWN_S)
    own_postgres.start()
    back_at = time.monotonic()
    time.sleep(10)
    done.set()
    uploader.join(timeout=120)
    print(
        f"PostgreSQL down {back_at - stopped_at:.1f} s; {len(acknowledged)} acknowledged; failed sends {failed_sends}"
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
    stored = stored_ids(own_postgres)
    assert acknowledged <= stored, "an acknowledged submission is missing"
    assert len(stored) == len(acknowledged) + len(failed_sends)
    wait_for(
        lambda: (
            requests.get(
                f"{fault_stack.base}/api/v1/leaderboard/", params={"campaign": "mv-ext-iquants"}, timeout=10
            ).json()["rows"][0]["n_submissions"]
            == len(stored)
        ),
        120,
        "the worker to refresh the cells after the restart",
    )
    served = leaderboard(fault_stack)
    rebuild = subprocess.run(
        [sys.executable, "manage.py", "rebuild_cells"], cwd=ROOT, env=fault_stack.env, capture_output=True, text=True
    )
    assert rebuild.returncode == 0, rebuild.stderr
    assert served == leaderboard(fault_stack)
    assert "worker" in fault_stack.processes and fault_stack.processes["worker"].poll() is None
    assert fault_stack.processes["web"].poll() is None
