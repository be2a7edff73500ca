"""The production commands (docker-compose.yml's web and worker) as local processes on a bench database."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LOGS = ROOT / "bench" / "results" / "logs"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def service_env(database_url: str, redis_url: str) -> dict[str, str]:
    """DEBUG off as deployed; throttles lifted so the figure measures the work, not the limiter."""
    return {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}",
        "DATABASE_URL": database_url,
        "REDIS_URL": redis_url,
        "DJANGO_SECRET_KEY": "bench-" + uuid.uuid4().hex * 2,
        "DJANGO_ALLOWED_HOSTS": "127.0.0.1,testserver",
        "DJANGO_SECURE_SSL_REDIRECT": "false",
        "BENCHHUB_THROTTLE_ADDRESS": "100000000/hour",
        "BENCHHUB_THROTTLE_KEY": "100000000/hour",
        "BENCHHUB_THROTTLE_READ": "100000000/hour",
        "BENCHHUB_THROTTLE_EXPORT": "100000000/hour",
        "BENCHHUB_THROTTLE_NETWORK": "100000000/hour",
        "BENCHHUB_THROTTLE_REGISTRATIONS": "100000000/hour",
        "CELERY_QUEUE": f"benchhub-bench-{uuid.uuid4().hex[:8]}",
        "DJANGO_LOG_LEVEL": "WARNING",
    }


class Stack:
    def __init__(self, env: dict[str, str], web_workers: int, worker_concurrency: int) -> None:
        self.env, self.logs = env, LOGS
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.commands = {
            # The web service's own config (deploy/gunicorn.conf.py: gthread workers), as deployed.
            "web": f"exec gunicorn benchhub.wsgi:application -c deploy/gunicorn.conf.py --bind 127.0.0.1:{self.port} "
            f"--workers {web_workers} --access-logfile {LOGS / 'access.log'}",
            "worker": f"exec celery -A benchhub worker --loglevel WARNING --concurrency {worker_concurrency}",
            # The sweeper, as in production: without it a refresh message that never came (a marker
            # left by an in-process run sharing the Redis database, say) left cells stale for good.
            "beat": f"exec celery -A benchhub beat --loglevel WARNING --schedule {LOGS / 'celerybeat-schedule'}",
        }
        self.processes: dict[str, subprocess.Popen[bytes]] = {}

    def start(self) -> None:
        self.logs.mkdir(parents=True, exist_ok=True)
        for name, command in self.commands.items():
            log = (self.logs / f"{name}.log").open("ab")
            self.processes[name] = subprocess.Popen(
                command,
                shell=True,
                cwd=ROOT,
                env=self.env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(f"{self.base}/api/v1/campaigns/", timeout=5) as answer:
                    if answer.status == 200:
                        return
            except OSError:
                time.sleep(0.3)
        raise RuntimeError(f"gunicorn did not answer; see {self.logs / 'web.log'}")

    def stop(self) -> None:
        for process in self.processes.values():
            try:
                os.killpg(process.pid, signal.SIGTERM)
                process.wait(timeout=30)
            except ProcessLookupError:
                continue
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(timeout=30)
        self.processes.clear()
