"""Issue 33: `make run` on a fresh database, as a newcomer runs it: it takes PORT=, prints one summary
line and then the URL, last, and that URL serves the published rows and the agent wheel."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from pathlib import Path

import requests

from benchhub.web.wheel import wheel_name

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_make_run_takes_a_port_and_prints_the_url_last(tmp_path: Path) -> None:
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k not in {"REDIS_URL", "DJANGO_DEBUG", "DJANGO_LOG_LEVEL"}}
    env |= {"DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}", "BENCHHUB_AGENT_WHEEL_DIR": str(tmp_path / "w")}
    out = (tmp_path / "out.log").open("w+")
    process = subprocess.Popen(
        ["make", "run", f"PORT={port}"], cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
    )
    url = f"http://127.0.0.1:{port}/"
    try:
        deadline = time.monotonic() + 400
        while url not in (tmp_path / "out.log").read_text() and time.monotonic() < deadline:
            assert process.poll() is None, (tmp_path / "out.log").read_text()
            time.sleep(1)
        lines = (tmp_path / "out.log").read_text().strip().splitlines()
        assert lines[-1].endswith(f"Open {url}"), lines
        assert len(lines) <= 3, lines  # make's install line at most, the summary, the URL
        assert requests.get(url + "api/v1/reference-rows/", timeout=30).json()
        assert requests.get(f"{url}agent/{wheel_name()}", timeout=30).status_code == 200
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=30)
        out.close()
