"""The snapshot at the state's size (issue 34, point 3): `manage.py write_snapshot` as its own process
(seconds, peak RSS, file size), then the file served through the production stack (gunicorn as
bench/stack.py starts it, behind nginx rendered from deploy/nginx.conf.template, the view answering
with X-Accel-Redirect) to a deliberately slow client: its status, the body's sha256 against the
headers and the index, and whether gunicorn logged a WORKER TIMEOUT. The same download from gunicorn
alone (a FileResponse from a sync worker) shows what a deployment without nginx does; and one chip's
CSV export through the stack shows whether it fits gunicorn's 30 s."""

from __future__ import annotations

import base64
import hashlib
import http.client
import json
import os
import shutil
import signal
import string
import subprocess
import sys
import tempfile
import time
import urllib.parse
from pathlib import Path
from typing import Any

from bench import payloads
from bench.figures import report
from bench.stack import LOGS, ROOT, Stack, free_port, service_env

TEMPLATE = ROOT / "deploy" / "nginx.conf.template"
ACCEL = "/_snapshot-files/"


class Nginx:
    """nginx in front of a local gunicorn, with deploy/nginx.conf.template's server block."""

    def __init__(self, upstream_port: int, snapshots: Path) -> None:
        self.port = free_port()
        self.home = Path(tempfile.mkdtemp(prefix="bench-nginx-"))
        server = string.Template(TEMPLATE.read_text()).safe_substitute(
            BENCHHUB_LISTEN=f"127.0.0.1:{self.port}",
            BENCHHUB_UPSTREAM=f"127.0.0.1:{upstream_port}",
            BENCHHUB_SNAPSHOT_DIR=str(snapshots),
        )
        temp = " ".join(
            f"{kind}_temp_path {self.home / kind};" for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")
        )
        (self.home / "nginx.conf").write_text(
            f"daemon off; worker_processes 1; pid {self.home / 'nginx.pid'}; error_log {LOGS / 'nginx-error.log'};\n"
            f"events {{}}\nhttp {{ access_log {LOGS / 'nginx-access.log'}; sendfile on; {temp}\n{server}\n}}\n"
        )
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        nginx = shutil.which("nginx") or "/usr/sbin/nginx"
        self.process = subprocess.Popen([nginx, "-c", str(self.home / "nginx.conf")], start_new_session=True)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                http.client.HTTPConnection("127.0.0.1", self.port, timeout=1).connect()
                return
            except OSError:
                time.sleep(0.1)
        raise RuntimeError(f"nginx did not start; see {LOGS / 'nginx-error.log'}")

    def stop(self) -> None:
        if self.process is not None:
            os.killpg(self.process.pid, signal.SIGTERM)
            self.process.wait(timeout=30)
        shutil.rmtree(self.home, ignore_errors=True)


def publish(env: dict[str, str]) -> tuple[float, int, str]:
    """`manage.py write_snapshot` as a process of its own: seconds, its peak RSS in KiB, its output."""
    started = time.perf_counter()
    process = subprocess.Popen(
        [sys.executable, "manage.py", "write_snapshot"], cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True
    )
    _, status, usage = os.wait4(process.pid, 0)
    seconds = time.perf_counter() - started
    output = process.stdout.read().strip() if process.stdout else ""
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"write_snapshot failed: {output}")
    return seconds, usage.ru_maxrss, output


def slow_download(port: int, path: str, seconds: float, size: int) -> dict[str, Any]:
    """GET path, reading at size/seconds bytes a second; what came, and how long it took."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    started = time.perf_counter()
    connection.request("GET", path, headers={"Host": "127.0.0.1"})
    response = connection.getresponse()
    rate = size / seconds
    digest, received = hashlib.sha256(), 0
    try:
        while piece := response.read(1 << 20):
            digest.update(piece)
            received += len(piece)
            ahead = received / rate - (time.perf_counter() - started)
            if ahead > 0:
                time.sleep(ahead)
    except (http.client.IncompleteRead, OSError) as exc:
        return {"status": response.status, "received": received, "error": repr(exc)[:80], "headers": {}}
    finally:
        connection.close()
    return {
        "status": response.status,
        "received": received,
        "sha256": digest.hexdigest(),
        "seconds": time.perf_counter() - started,
        "headers": dict(response.getheaders()),
        "error": None,
    }


def worker_timeouts(log: Path, since: int) -> int:
    with log.open("rb") as file:
        file.seek(since)
        return file.read().count(b"WORKER TIMEOUT")


def log_size(log: Path) -> int:
    return log.stat().st_size if log.exists() else 0


def judged(result: dict[str, Any], index: dict[str, Any], timeouts: int) -> str:
    headers = result["headers"]
    stated = headers.get("Repr-Digest", "")
    repr_hex = base64.b64decode(stated.removeprefix("sha-256=:").removesuffix(":")).hex() if stated else None
    whole = result["error"] is None and result["received"] == index["size_bytes"]
    agree = whole and result["sha256"] == index["sha256"] == headers.get("X-Snapshot-Sha256") == repr_hex
    seconds = f"{result['seconds']:.1f} s" if whole else f"cut ({result['error'] or 'the connection closed'})"
    return (
        f"HTTP {result['status']}, {result['received']:,} of {index['size_bytes']:,} bytes, {seconds}; "
        f"sha256 of the body = Repr-Digest = X-Snapshot-Sha256 = index: {'yes' if agree else 'NO'}; "
        f"WORKER TIMEOUT in gunicorn's log: {timeouts}"
    )


def csv_through(port: int, path: str) -> str:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
    started = time.perf_counter()
    connection.request("GET", path, headers={"Host": "127.0.0.1"})
    response = connection.getresponse()
    lines, tail, error = 0, b"", None
    try:
        while piece := response.read(1 << 16):
            lines += piece.count(b"\n")
            tail = piece[-200:]
    except (http.client.IncompleteRead, OSError) as exc:
        error = repr(exc)[:80]
    finally:
        connection.close()
    ended = "complete" if error is None and tail.endswith(b"\n") else f"cut ({error or 'ends mid-line'})"
    return f"HTTP {response.status}, {max(lines - 1, 0):,} rows in {time.perf_counter() - started:.1f} s, {ended}"


def run(database: str, redis: str, seconds: float, web_workers: int) -> None:
    from benchhub.results.models import LeaderboardCell, Submission

    name = database.rsplit("/", 1)[1]
    snapshots = LOGS.parent / f"snapshots-{name}"
    env = service_env(database, redis) | {"BENCHHUB_SNAPSHOT_DIR": str(snapshots)}
    lines = [f"{Submission.objects.count():,} stored submissions"]
    took, rss, output = publish(env)
    index = json.loads((snapshots / "index.json").read_text())
    lines.append(
        f"write_snapshot: {took:.1f} s, peak RSS {rss / 1024:.0f} MiB, {index['size_bytes'] / 2**20:,.1f} MiB "
        f"for {index['submissions']:,} submissions ({output})"
    )
    chip = LeaderboardCell.objects.order_by("-n_submissions").values_list("chip", flat=True)[0]
    web_log = LOGS / "web.log"
    for behind_nginx in (True, False):
        stack = Stack(env | ({"BENCHHUB_SNAPSHOT_ACCEL_REDIRECT": ACCEL} if behind_nginx else {}), web_workers, 1)
        stack.commands = {"web": stack.commands["web"]}  # gunicorn alone: no worker or beat writes meanwhile
        front = Nginx(stack.port, snapshots) if behind_nginx else None
        since = log_size(web_log)
        try:
            stack.start()
            if front:
                front.start()
            port = front.port if front else stack.port
            result = slow_download(port, "/api/v1/snapshot/", seconds, index["size_bytes"])
            where = f"nginx + gunicorn --workers {web_workers}" if front else f"gunicorn --workers {web_workers} alone"
            lines.append(f"slow client ({seconds:.0f} s planned) through {where}: ")
            lines[-1] += judged(result, index, worker_timeouts(web_log, since))
            if front:
                since = log_size(web_log)
                query = urllib.parse.urlencode({"campaign": payloads.CAMPAIGN, "chip": chip})
                csv = csv_through(port, f"/api/v1/measurements.csv?{query}")
                lines.append(f"CSV export of one chip ({chip}) through the stack: {csv}; ")
                lines[-1] += f"WORKER TIMEOUT: {worker_timeouts(web_log, since)}"
        finally:
            if front:
                front.stop()
            stack.stop()
    report(f"snapshot at {name}: written, then served to a slow client", lines)
