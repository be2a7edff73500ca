"""Issue 7, item 7: the agent's outbox and the idempotent nonce lose nothing and duplicate nothing
when the agent is SIGKILLed mid-upload, the network is cut after the server committed, or the
server answers 500 after committing. The real `benchhub-agent upload` runs as a process against a
live server, through a proxy that injects the fault into the first submission POST."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import requests
from benchhub_agent import keys, outbox
from benchhub_agent.dirs import home

from benchhub.results.models import Submission
from tests.conftest import build_payload, signed_submission
from tests.server.test_processes import wait_for

pytestmark = pytest.mark.django_db(transaction=True)


class FaultyProxy(ThreadingHTTPServer):
    """Forwards to the live server; the first submission POST meets `fault` after it was forwarded."""

    def __init__(self, upstream: str, fault: str) -> None:
        super().__init__(("127.0.0.1", 0), ProxyHandler)
        self.upstream = upstream
        self.fault = fault  # "cut", "500", or "hold" (never answer until released)
        self.faults_left = 1
        self.forwarded = threading.Event()
        self.release = threading.Event()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class ProxyHandler(BaseHTTPRequestHandler):
    server: FaultyProxy

    def log_message(self, format: str, *args: Any) -> None:
        return

    def _forward(self, method: str) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        answer = requests.request(
            method,
            self.server.upstream + self.path,
            data=body,
            headers={"Content-Type": self.headers.get("Content-Type", "")},
            timeout=30,
        )
        faulted = method == "POST" and self.path == "/api/v1/submissions/" and self.server.faults_left > 0
        if faulted:
            self.server.faults_left -= 1
            self.server.forwarded.set()
            if self.server.fault == "cut":
                self.close_connection = True
                self.connection.shutdown(2)
                return
            if self.server.fault == "hold":
                self.server.release.wait(60)
                return
        status, content = (
            (500, b'{"error":"server_error","detail":"injected"}')
            if faulted
            else (
                answer.status_code,
                answer.content,
            )
        )
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(content)))
        self.end_headers()
        self.wfile.write(content)

    def do_GET(self) -> None:
        self._forward("GET")

    def do_POST(self) -> None:
        self._forward("POST")


@pytest.fixture
def agent_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "agent-home"
    monkeypatch.setenv("BENCHHUB_HOME", str(folder))
    return folder


def proxy_for(live_server: Any, fault: str) -> Iterator[FaultyProxy]:
    proxy = FaultyProxy(live_server.url, fault)
    thread = threading.Thread(target=proxy.serve_forever, daemon=True)
    thread.start()
    try:
        yield proxy
    finally:
        proxy.release.set()
        proxy.shutdown()
        proxy.server_close()


def queue_one_result() -> Path:
    """What `benchhub-agent run` leaves in the outbox before its first upload attempt."""
    dirs = home()
    signer = keys.load_or_create(dirs)
    payload = build_payload()
    return outbox.put(dirs, payload["nonce"], signed_submission(payload, signer))


def agent_upload(server: str, agent_home: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "benchhub_agent", "upload", "--server", server, "--handle", "ada"],
        env={**os.environ, "BENCHHUB_HOME": str(agent_home)},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


@pytest.mark.parametrize("fault", ["cut", "500"])
def test_it_stores_the_result_once_when_the_answer_after_commit_is_lost(
    live_server: Any, campaign: Any, agent_home: Path, fault: str
) -> None:
    queued = queue_one_result()
    for proxy in proxy_for(live_server, fault):
        agent = agent_upload(proxy.url, agent_home)
        output, _ = agent.communicate(timeout=120)
        assert agent.returncode == 0, output
        assert proxy.faults_left == 0, "the fault was never injected"
    assert not queued.exists(), "the acknowledged result is still queued"
    assert Submission.objects.count() == 1


def test_it_keeps_the_result_queued_when_the_agent_is_killed_mid_upload(
    live_server: Any, campaign: Any, agent_home: Path
) -> None:
    queued = queue_one_result()
    for proxy in proxy_for(live_server, "hold"):
        agent = agent_upload(proxy.url, agent_home)
        assert proxy.forwarded.wait(60), "the upload never reached the server"
        agent.send_signal(signal.SIGKILL)
        agent.wait(timeout=30)
    assert queued.exists(), "the result left the outbox without an acknowledgement"
    assert Submission.objects.count() == 1, "the server committed before the agent died"
    again = agent_upload(live_server.url, agent_home)
    output, _ = again.communicate(timeout=120)
    assert again.returncode == 0, output
    assert not queued.exists()
    wait_for(lambda: Submission.objects.count() == 1, 5, "the row count to settle")
    assert Submission.objects.count() == 1
