"""What the slow fault tests share: the compose commands as native processes (from
tests/server/test_processes.py) pointed at a Redis of their own, a steady stream of signed posts,
and the check that the served cells equal a recomputation from scratch."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import redis
import requests

from benchhub.results import cells
from benchhub.results.models import LeaderboardCell, Submission
from tests.conftest import build_payload, persona, signed_registration, signed_submission
from tests.server.test_processes import ROOT, Stack, free_port, start_web, wait_for

SIGNERS = ("ada", "bob", "cole", "dina")
SIZES = (1, 2, 4, 8)


class OwnRedis:
    """A throwaway redis-server on its own port: the machine's Redis is shared and never stopped."""

    def __init__(self, tmp_path: Path) -> None:
        self.port = free_port()
        self.dir = tmp_path / "redis"
        self.dir.mkdir()
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        server = shutil.which("redis-server")
        assert server, "redis-server is not installed"
        self.process = subprocess.Popen(
            [server, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
            cwd=self.dir,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        wait_for(self.answers, 20, "redis-server to answer")

    def answers(self) -> bool:
        try:
            return bool(redis.Redis(port=self.port, socket_timeout=1).ping())
        except redis.RedisError:
            return False

    def kill(self) -> None:
        assert self.process is not None
        self.process.kill()
        self.process.wait(timeout=10)
        self.process = None


# The signal `pg_ctl stop` sends to the postmaster for each shutdown mode.
SHUTDOWN_SIGNALS = {"fast": signal.SIGINT, "immediate": signal.SIGQUIT}


def process_exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


class OwnPostgres:
    """A throwaway PostgreSQL cluster on its own port, run as the postgres user (the server refuses
    root); the machine's cluster on 5432 is shared and never restarted."""

    def __init__(self) -> None:
        self.port = free_port()
        # Not under pytest's tmp_path: its parents are private to root, and the server runs as postgres.
        self.root = Path(tempfile.mkdtemp(prefix="benchhub-pg-"))
        self.data = self.root / "data"
        bindir = sorted(Path("/usr/lib/postgresql").glob("*/bin"))
        assert bindir, "PostgreSQL server binaries are not installed"
        self.bin = bindir[-1]

    @property
    def url(self) -> str:
        return f"postgres://postgres@127.0.0.1:{self.port}/benchhub"

    def _as_postgres(self, *command: str) -> None:
        done = subprocess.run(
            ["runuser", "-u", "postgres", "--", *command], capture_output=True, text=True, timeout=120
        )
        assert done.returncode == 0, f"{command[0]} failed: {done.stdout}{done.stderr}"

    def create(self) -> None:
        shutil.chown(self.root, "postgres", "postgres")
        self._as_postgres(str(self.bin / "initdb"), "-D", str(self.data), "-A", "trust", "-U", "postgres")
        self.start()
        self._as_postgres(str(self.bin / "createdb"), "-h", "127.0.0.1", "-p", str(self.port), "benchhub")

    def _ctl(self, *args: str) -> None:
        options = f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1"
        self._as_postgres(str(self.bin / "pg_ctl"), "-D", str(self.data), "-o", options, "-w", *args)

    def start(self) -> None:
        self._ctl("-l", str(self.root / "server.log"), "start")

    def stop(self, mode: str = "fast") -> None:
        self._ctl("-m", mode, "stop")

    def shut_down_now(self, mode: str) -> None:
        """What `pg_ctl -m MODE stop` does, without pg_ctl's start-up time, so a test can stop the
        server at a moment it chose: the mode's signal to the postmaster, then wait for its exit.
        "fast" ends the sessions and writes a shutdown checkpoint; "immediate" is a crash (no
        checkpoint, WAL still in memory is lost; the next start replays the WAL on disk)."""
        postmaster = int((self.data / "postmaster.pid").read_text().split()[0])
        os.kill(postmaster, SHUTDOWN_SIGNALS[mode])
        wait_for(lambda: not process_exists(postmaster), 120, f"PostgreSQL's {mode} shutdown")

    def remove(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)


class RestartPolicy:
    """docker-compose's `restart: unless-stopped` for the native processes: a service that exits on
    its own is started again, and each restart is counted (a finding, never hidden)."""

    def __init__(self, stack: Stack, services: tuple[str, ...]) -> None:
        self.stack = stack
        self.services = services
        self.restarts: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)

    def _watch(self) -> None:
        while not self._stop.wait(0.5):
            for service in self.services:
                process = self.stack.processes.get(service)
                if process is not None and process.poll() is not None:
                    self.restarts.append(f"{service} exited with {process.returncode}")
                    self.stack.start(service)

    def __enter__(self) -> RestartPolicy:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=10)


def register_signers(stack: Stack) -> None:
    for handle in SIGNERS:
        answer = stack.post("/api/v1/contributors/", signed_registration(persona(handle), handle))
        assert answer.status_code == 201, answer.text


def numbered_envelope(number: int) -> bytes:
    """Distinct numbers per submission, so a lost or doubled one changes the medians."""
    tg = {
        name: {size: [100.0 + number + shift, 101.0 + number + shift] for size in SIZES}
        for name, shift in (("upstream", 0), ("01", 40))
    }
    # Four chips: four cell groups, as a real crowd spreads over machines.
    machine = {"chip": f"Apple M{number % 4 + 1}"}
    return signed_submission(build_payload(tg=tg, machine=machine), persona(SIGNERS[number % len(SIGNERS)]))


@dataclass
class PostStream:
    """Posts signed submissions one after another from a thread until stopped."""

    stack: Stack
    interval_s: float = 0.1
    answers: list[tuple[float, int, str]] = field(default_factory=list)  # (time, status, submission id or text)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def _run(self) -> None:
        number = 0
        while not self._stop.is_set():
            body = numbered_envelope(number)
            number += 1
            started = time.monotonic()
            try:
                answer = self.stack.post("/api/v1/submissions/", body)
                detail = answer.json().get("id", "") if answer.status_code < 300 else answer.text[:200]
                self.answers.append((started, answer.status_code, detail))
            except requests.RequestException as error:
                self.answers.append((started, 0, repr(error)))
            self._stop.wait(self.interval_s)

    def __enter__(self) -> PostStream:
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=60)

    def refused(self) -> list[tuple[float, int, str]]:
        return [answer for answer in self.answers if not 200 <= answer[1] < 300]

    def acknowledged_ids(self) -> set[str]:
        return {detail for _, status, detail in self.answers if 200 <= status < 300}


def refreshed_count() -> int:
    return Submission.objects.filter(cells_refreshed_at__isnull=False).count()


def all_refreshed(ids: list[str]) -> bool:
    return not Submission.objects.filter(id__in=ids, cells_refreshed_at__isnull=True).exists()


# What a cell holds (all but its id and when it was written), with the cell's name.
CELL_FIELDS = tuple(
    field.attname for field in LeaderboardCell._meta.concrete_fields if field.name not in ("id", "updated_at")
)
CELL_NAME = ("campaign_id", "chip", "gpu_cores", "model_sha256", "variant", "batch_size")


def served_cells() -> dict[tuple[Any, ...], dict[str, Any]]:
    return {tuple(row[name] for name in CELL_NAME): row for row in LeaderboardCell.objects.values(*CELL_FIELDS)}


def assert_cells_match_a_recomputation(expected_submissions: int) -> None:
    """The cells as the workers left them equal a recomputation from the stored rows."""
    served = served_cells()
    assert served, "no cells were served"
    assert sum(row["n_submissions"] for key, row in served.items() if key[4:] == ("01", 1)) == expected_submissions
    cells.refresh_all_cells()
    recomputed = served_cells()
    differing = {
        key: {
            name: (value, recomputed.get(key, {}).get(name))
            for name, value in row.items()
            if value != recomputed.get(key, {}).get(name)
        }
        for key, row in served.items()
        if row != recomputed.get(key)
    }
    missing = sorted(set(recomputed) - set(served), key=repr)
    assert not differing and not missing, (
        f"served (left) against recomputed (right): {differing}; only recomputed: {missing}"
    )


__all__ = ["ROOT", "Stack", "start_web", "wait_for"]
