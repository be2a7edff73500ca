"""Issue 46, point 1: a CSV export that takes longer than the web worker's timeout. gunicorn runs as
the web service runs it (deploy/gunicorn.conf.py, gthread workers) with a 2 s timeout, and a slow
client reads ~11 MB over more than 4 s: the whole file arrives, ending with its row count, the line
whose absence tells a client that a body was cut (tests/conftest.py read_csv checks it everywhere)."""

from __future__ import annotations

import copy
import os
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from django.db import connection

from benchhub.results.models import Measurement
from tests.conftest import Api, build_payload

pytestmark = pytest.mark.django_db(transaction=True)

ROOT = Path(__file__).resolve().parents[2]
ROWS = 30_000
TIMEOUT_S = 2
SLOW_FOR_S = 2 * TIMEOUT_S + 0.5


@pytest.fixture
def many_rows(api: Api, ada: Any) -> int:
    """One real submission's measurements, copied to ROWS rows (batch sizes past any real sweep)."""
    response = api.submit(build_payload(), ada)
    assert response.status_code == 201
    template = Measurement.objects.filter(submission_id=response.json()["id"]).first()
    assert template is not None
    copies = []
    for size in range(1000, 1000 + ROWS - Measurement.objects.count()):
        row = copy.copy(template)
        row.pk, row.batch_size = None, size
        copies.append(row)
    Measurement.objects.bulk_create(copies, batch_size=5000)
    return Measurement.objects.count()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def gunicorn(request: pytest.FixtureRequest) -> Iterator[int]:
    """gunicorn with the web service's config, a 2 s timeout and the worker class the test names."""
    port = _free_port()
    db = connection.settings_dict
    env = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}",
        "DATABASE_URL": f"postgres://{db['USER']}@{db['HOST']}:{db['PORT']}/{db['NAME']}",
        "DJANGO_SECRET_KEY": "export-test-" + uuid.uuid4().hex * 2,
        "DJANGO_DEBUG": "0",
        "DJANGO_ALLOWED_HOSTS": "127.0.0.1",
        "DJANGO_SECURE_SSL_REDIRECT": "false",
        "BENCHHUB_THROTTLE_EXPORT": "1000/minute",
    }
    command = [
        "gunicorn",
        "benchhub.wsgi:application",
        "-c",
        "deploy/gunicorn.conf.py",
        "--bind",
        f"127.0.0.1:{port}",
        "--workers",
        "1",
        "--timeout",
        str(TIMEOUT_S),
        "--worker-class",
        request.param,
    ]
    process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.2)
        yield port
    finally:
        process.terminate()
        process.wait(timeout=30)


def slow_download(port: int, path: str) -> bytes:
    """An HTTP/1.0 GET (no chunking: the body ends when the connection does) through a small
    receive window, read slowly for SLOW_FOR_S, then as fast as it comes."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect(("127.0.0.1", port))
    sock.sendall(f"GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n".encode())
    received = bytearray()
    started = time.monotonic()
    sock.settimeout(60)
    while chunk := sock.recv(4096):
        received += chunk
        if time.monotonic() - started < SLOW_FOR_S:
            time.sleep(0.01)
    sock.close()
    return bytes(received)


def _body(response: bytes) -> str:
    head, _, body = response.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200") or head.startswith(b"HTTP/1.0 200"), head[:200]
    return body.decode()


@pytest.mark.parametrize("gunicorn", ["gthread"], indirect=True)
def test_an_export_longer_than_the_worker_timeout_arrives_whole(gunicorn: int, many_rows: int) -> None:
    started = time.monotonic()
    body = _body(slow_download(gunicorn, "/api/v1/measurements.csv"))
    took = time.monotonic() - started
    assert took > 2 * TIMEOUT_S, f"the download took {took:.1f} s: not past the timeout"
    lines = body.rstrip("\r\n").split("\r\n")
    assert lines[-1] == f"# complete: {many_rows} rows"
    assert len(lines) == many_rows + 2  # the header, the rows, the count


def test_the_web_service_runs_the_config_this_test_runs() -> None:
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    assert "-c deploy/gunicorn.conf.py" in compose["services"]["web"]["command"]
    assert "COPY deploy/gunicorn.conf.py" in (ROOT / "Dockerfile").read_text()
