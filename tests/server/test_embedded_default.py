"""Item 2 of the issue: with no DATABASE_URL and no REDIS_URL the service runs on SQLite with
Celery tasks in-process, and a submission reaches the leaderboard within the request."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import PATCH_TEXT

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = """
import json, django
django.setup()
from django.conf import settings
from django.core.management import call_command
from django.test import Client
from tests.conftest import Api, build_payload, persona

call_command("migrate", verbosity=0)
api = Api(Client())
ada = persona("ada")
registered = api.register(ada, "ada").status_code
created = api.submit(build_payload(), ada).status_code
board = Client().get("/api/v1/leaderboard/", {"campaign": "mv-ext-iquants", "variant": "01", "batch_size": 4})
print(json.dumps({"engine": settings.DATABASES["default"]["ENGINE"], "eager": settings.CELERY_TASK_ALWAYS_EAGER,
                  "statuses": [registered, created], "rows": board.json()["rows"]}))
"""


def test_it_runs_on_sqlite_with_tasks_in_process_when_no_variables_are_set(tmp_path: Path) -> None:
    patches = tmp_path / "patches"
    patches.mkdir()
    for name, text in PATCH_TEXT.items():
        (patches / name).write_bytes(text)
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(tmp_path),
        "PYTHONPATH": str(ROOT),
        "DJANGO_SETTINGS_MODULE": "benchhub.settings",
        # Only where the files go differs from a bare run: the default SQLite file and patches/ sit in the checkout.
        "DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}",
        "BENCHHUB_PATCHES_DIR": str(patches),
    }
    result = subprocess.run(
        [sys.executable, "-c", SCRIPT], cwd=ROOT, env=env, capture_output=True, text=True, timeout=180
    )
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["engine"] == "django.db.backends.sqlite3" and report["eager"] is True
    assert report["statuses"] == [201, 201]
    assert [(row["variant"], row["batch_size"], row["n_submissions"]) for row in report["rows"]] == [("01", 4, 1)]
