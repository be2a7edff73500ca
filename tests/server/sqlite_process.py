"""Run a script in a fresh Python process on a fresh SQLite database, as the embedded default runs
(DJANGO_DEBUG=1 and no REDIS_URL: Celery tasks in process), and return the JSON object its last line prints."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.conftest import PATCH_TEXT

ROOT = Path(__file__).resolve().parents[2]


def run_on_fresh_sqlite(tmp_path: Path, script: str, timeout: int) -> dict[str, Any]:
    patches = tmp_path / "patches"
    patches.mkdir()
    for name, text in PATCH_TEXT.items():
        (patches / name).write_bytes(text)
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(tmp_path),
        # This checkout's code, also where the installed packages point at another checkout.
        "PYTHONPATH": os.pathsep.join(str(path) for path in (ROOT, ROOT / "protocol", ROOT / "agent")),
        "DJANGO_SETTINGS_MODULE": "benchhub.settings",
        "DJANGO_DEBUG": "1",  # as `make run` starts it: without a secret key nothing else starts
        # Only where the files go differs from a bare run: the default SQLite file and patches/ sit in the checkout.
        "DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}",
        "BENCHHUB_PATCHES_DIR": str(patches),
        "BENCHHUB_SNAPSHOT_DIR": str(tmp_path / "snapshots"),
    }
    result = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout
    )
    assert result.returncode == 0, result.stderr[-3000:]
    report: dict[str, Any] = json.loads(result.stdout.strip().splitlines()[-1])
    return report
