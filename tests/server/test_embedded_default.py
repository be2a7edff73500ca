"""Item 2 of the issue: with DJANGO_DEBUG=1 and no DATABASE_URL or REDIS_URL the service runs on SQLite with
Celery tasks in-process, and a submission reaches the leaderboard within the request."""

from __future__ import annotations

from pathlib import Path

from tests.server.sqlite_process import run_on_fresh_sqlite

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


def test_it_runs_on_sqlite_with_tasks_in_process_when_only_debug_is_set(tmp_path: Path) -> None:
    report = run_on_fresh_sqlite(tmp_path, SCRIPT, timeout=180)
    assert report["engine"] == "django.db.backends.sqlite3" and report["eager"] is True
    assert report["statuses"] == [201, 201]
    assert [(row["variant"], row["batch_size"], row["n_submissions"]) for row in report["rows"]] == [("01", 4, 1)]
