"""docker-compose.yml's web, worker and beat commands, run natively against the machine's real
PostgreSQL and Redis: the web service serves what `make run` shows a reader (the published reference
rows, the agent wheel), a submission over HTTP reaches the leaderboard, and a worker killed with
SIGKILL mid-refresh loses nothing once it is restarted."""

from __future__ import annotations

import io
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
import yaml
from benchhub_agent import __version__
from django.db import connection

from benchhub.results import cells
from benchhub.results.models import LeaderboardCell, Submission
from tests.conftest import build_payload, persona, signed_registration, signed_submission

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = yaml.safe_load((ROOT / "docker-compose.yml").read_text())

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def _real_redis() -> None:
    """These tests run the real worker and beat: without a broker they fail, never skip."""
    if not os.environ.get("REDIS_URL"):
        pytest.fail("tests/server/test_processes.py needs a real Redis: set REDIS_URL (make test does).")


def wait_for(condition: Callable[[], Any], timeout: float, what: str, interval: float = 0.2) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        result = condition()
        if result:
            return result
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Stack:
    """The compose services' commands as native processes, each in its own process group."""

    def __init__(self, tmp_path: Path, patches_dir: Path) -> None:
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.tmp_path = tmp_path
        db = connection.settings_dict
        self.env = {
            **os.environ,
            "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}",
            "DATABASE_URL": f"postgres://{db['USER']}@{db['HOST']}:{db['PORT']}/{db['NAME']}",
            "DJANGO_SECRET_KEY": "process-test-" + uuid.uuid4().hex * 2,
            "DJANGO_DEBUG": "0",  # production settings: the suite's own DJANGO_DEBUG=1 must not leak in
            "DJANGO_ALLOWED_HOSTS": "127.0.0.1",
            "DJANGO_SECURE_SSL_REDIRECT": "false",
            "DJANGO_STATIC_ROOT": str(tmp_path / "static"),
            "BENCHHUB_PATCHES_DIR": str(patches_dir),
            "BENCHHUB_SNAPSHOT_DIR": str(tmp_path / "snapshots"),
            "BENCHHUB_THROTTLE_ADDRESS": "100000/hour",
            "BENCHHUB_THROTTLE_KEY": "100000/hour",
            "BENCHHUB_SWEEPER_INTERVAL_SECONDS": "1",
            "BENCHHUB_SWEEPER_GRACE_SECONDS": "2",
            "CELERY_VISIBILITY_TIMEOUT_SECONDS": "5",
            # The tests compare boards with what the cells say right after a refresh: never stale.
            "BENCHHUB_BOARD_MAX_STALENESS_SECONDS": "0",
            "CELERY_QUEUE": f"benchhub-test-{uuid.uuid4().hex[:8]}",  # no stray messages from other runs
        }
        self.processes: dict[str, subprocess.Popen[bytes]] = {}

    def command(self, service: str) -> str:
        command = str(COMPOSE["services"][service]["command"])
        return command.replace("0.0.0.0:8000", f"127.0.0.1:{self.port}").replace(
            "/tmp/celerybeat-schedule", str(self.tmp_path / "celerybeat-schedule")
        )

    def start(self, service: str) -> None:
        log = (self.tmp_path / f"{service}.log").open("ab")
        self.processes[service] = subprocess.Popen(
            self.command(service),
            shell=True,
            cwd=ROOT,
            env={**self.env, "PGAPPNAME": f"benchhub-test-{service}"},  # whose database sessions are whose
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def kill(self, service: str, sig: int = signal.SIGKILL) -> None:
        process = self.processes.pop(service)
        try:
            os.killpg(process.pid, sig)
            process.wait(timeout=30)
        except ProcessLookupError:
            return
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=30)

    def stop_all(self) -> None:
        for service in list(self.processes):
            self.kill(service, signal.SIGTERM)

    def log(self, service: str) -> str:
        return (self.tmp_path / f"{service}.log").read_text(errors="replace")[-3000:]

    def web_is_up(self) -> bool:
        try:
            return requests.get(f"{self.base}/api/v1/campaigns/", timeout=5).status_code == 200
        except requests.RequestException:
            return False

    def post(self, path: str, body: bytes) -> requests.Response:
        return requests.post(f"{self.base}{path}", data=body, headers={"Content-Type": "application/json"}, timeout=10)


@pytest.fixture
def stack(campaign: Any, patches_dir: Path, tmp_path: Path) -> Iterator[Stack]:
    services = Stack(tmp_path, patches_dir)
    try:
        yield services
    finally:
        services.stop_all()


def start_web(stack: Stack, timeout: float = 90) -> None:
    stack.start("web")
    try:
        wait_for(stack.web_is_up, timeout, "gunicorn to answer")
    except AssertionError:
        raise AssertionError(stack.log("web")) from None


def test_the_web_service_serves_the_reference_rows_and_the_agent_wheel_as_make_run_does(
    stack: Stack, tmp_path: Path
) -> None:
    """The compose web command, on an empty wheel folder and no reference rows: it loads and builds
    them itself (prepare_site, the command make run runs too)."""
    stack.env["BENCHHUB_AGENT_WHEEL_DIR"] = str(tmp_path / "wheel")
    assert "prepare_site" in stack.command("web")
    assert "prepare_site" in (ROOT / "Makefile").read_text()
    start_web(stack, timeout=240)  # prepare_site builds the wheel first
    rows = requests.get(f"{stack.base}/api/v1/reference-rows/", timeout=10)
    assert rows.status_code == 200 and len(rows.json()) >= 10, rows.text[:300]
    assert {row["campaign"] for row in rows.json()} >= {"mv-ext-iquants"}
    home = requests.get(f"{stack.base}/", timeout=10)
    assert home.status_code == 200 and "published, not signed" in home.text
    name = f"benchhub_agent-{__version__}-py3-none-any.whl"
    assert f"/agent/{name}" in home.text
    served = requests.get(f"{stack.base}/agent/{name}", timeout=10)
    assert served.status_code == 200, served.status_code
    assert zipfile.ZipFile(io.BytesIO(served.content)).getinfo("benchhub_agent/__init__.py")
    assert (tmp_path / "wheel" / name).is_file()


def test_it_runs_the_compose_commands_and_a_submission_reaches_the_leaderboard(stack: Stack) -> None:
    start_web(stack)
    stack.start("worker")
    stack.start("beat")
    ada = persona("ada")
    assert stack.post("/api/v1/contributors/", signed_registration(ada, "ada")).status_code == 201
    sent = signed_submission(build_payload(), ada)
    created = stack.post("/api/v1/submissions/", sent)
    assert created.status_code == 201, created.text

    def row() -> dict[str, Any] | None:
        board = requests.get(f"{stack.base}/api/v1/leaderboard/", params={"campaign": "mv-ext-iquants"}, timeout=5)
        return next((r for r in board.json()["rows"] if r["variant"] == "01" and r["batch_size"] == 4), None)

    try:
        found = wait_for(row, 60, "the leaderboard row")
    except AssertionError:
        raise AssertionError(stack.log("worker")) from None
    assert found["speedup"] == pytest.approx(210 / 148)
    assert found["n_submissions"] == 1
    stored = requests.get(f"{stack.base}/api/v1/submissions/{created.json()['id']}/envelope", timeout=5)
    assert stored.content == sent
    schema = requests.get(f"{stack.base}/api/v1/schema/", timeout=5)
    assert schema.status_code == 200


def test_it_loses_no_submission_when_the_worker_is_killed_mid_refresh(stack: Stack) -> None:
    start_web(stack)
    signers = [persona(name) for name in ("ada", "bob", "cole", "dina")]
    for index, signer in enumerate(signers):
        assert stack.post("/api/v1/contributors/", signed_registration(signer, f"p{index}")).status_code == 201
    sizes = (1, 2, 3, 4, 5, 8, 9, 12, 16)
    count, chips = 40, 8  # refreshes are queued per cell group: eight groups, eight refreshes to interrupt
    for n in range(count):
        tg = {
            name: {size: [100.0 + n + shift, 101.0 + n + shift, 100.5 + n + shift] for size in sizes}  # a cycle
            for name, shift in (("upstream", 0), ("01", 40), ("01+02", 60))
        }
        payload = build_payload(tg=tg, machine={"chip": f"Apple M{n % chips + 1} Max"})
        response = stack.post("/api/v1/submissions/", signed_submission(payload, signers[n % 4]))
        assert response.status_code == 201, response.text

    def refreshed() -> int:
        return Submission.objects.filter(cells_refreshed_at__isnull=False).count()

    stack.start("worker")
    wait_for(refreshed, 90, "the worker to refresh a first submission", interval=0.02)
    stack.kill("worker")
    done_at_kill = refreshed()
    assert done_at_kill < count, "the worker finished before it could be killed; the test proved nothing"

    stack.start("worker")
    stack.start("beat")
    wait_for(lambda: refreshed() == count, 90, "every submission to be refreshed after the restart")
    served = {
        (c.chip, c.quant, c.variant, c.batch_size): (c.speedup, c.tg_tps, c.n_submissions, c.n_contributors)
        for c in LeaderboardCell.objects.all()
    }
    assert len(served) == chips * 3 * len(sizes)
    assert {value[2:] for value in served.values()} == {(count // chips, 1)}
    cells.refresh_all_cells()
    recomputed = {
        (c.chip, c.quant, c.variant, c.batch_size): (c.speedup, c.tg_tps, c.n_submissions, c.n_contributors)
        for c in LeaderboardCell.objects.all()
    }
    assert served == recomputed


def worker_sessions() -> set[tuple[int, Any]]:
    """The worker's live database sessions (its processes run with PGAPPNAME=benchhub-test-worker).
    The web's sessions are left out: its gthread workers open one per thread as requests reach them."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pid, backend_start FROM pg_stat_activity "
            "WHERE datname = current_database() AND application_name = 'benchhub-test-worker'"
        )
        return {(int(pid), started) for pid, started in cursor.fetchall()}


def test_the_worker_keeps_its_database_connection_and_replaces_one_the_server_dropped(stack: Stack) -> None:
    """Celery's Django fixup closed the worker's connections around every task (a new PostgreSQL
    process for every refresh); now they live as long as CONN_MAX_AGE, checked before each task.
    No beat: a refresh that failed is not done again by the sweeper, so a broken connection shows."""
    start_web(stack)
    stack.start("worker")
    ada = persona("ada")
    assert stack.post("/api/v1/contributors/", signed_registration(ada, "ada")).status_code == 201

    def submit_and_wait(n: int) -> None:
        tg = {"upstream": {4: [100.0 + n] * 2}, "01": {4: [150.0] * 2}}
        payload = build_payload(tg=tg, machine={"chip": f"Apple M{n} Max"})  # a group of its own: one refresh each
        assert stack.post("/api/v1/submissions/", signed_submission(payload, ada)).status_code == 201
        try:
            wait_for(
                lambda: not Submission.objects.filter(cells_refreshed_at__isnull=True).exists(), 60, f"refresh {n}"
            )
        except AssertionError:
            raise AssertionError(stack.log("worker")) from None

    submit_and_wait(1)
    seen: set[tuple[int, Any]] = set()
    for n in range(2, 14):
        submit_and_wait(n)
        time.sleep(0.3)  # the task has returned: a connection closed around it would be gone by now
        live = worker_sessions()
        assert live, f"the worker holds no database session after refresh {n}"
        seen |= live
    assert len(seen) <= 2, f"{len(seen)} worker database sessions for 12 refreshes (concurrency 2)"

    with connection.cursor() as cursor:  # what a server restart or an idle timeout does to a connection
        cursor.execute(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )
        assert cursor.fetchone()[0] >= 2, "the web's and the worker's connections"
    submit_and_wait(14)
