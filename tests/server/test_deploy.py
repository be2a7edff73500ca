"""Item 2 of the issue: production variables give a clean `check --deploy`, and the OpenAPI
schema validates without warnings."""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def manage(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )


def production_env() -> dict[str, str]:
    return {
        "PATH": os.environ["PATH"],
        "HOME": os.environ.get("HOME", "/tmp"),
        "DJANGO_SECRET_KEY": secrets.token_urlsafe(50),
        "DJANGO_ALLOWED_HOSTS": "benchhub.example.org",
        "DATABASE_URL": os.environ.get("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/postgres"),
        "REDIS_URL": os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0"),
    }


def test_it_passes_the_deploy_check_with_production_variables() -> None:
    result = manage("check", "--deploy", "--fail-level", "WARNING", env=production_env())
    assert result.returncode == 0, result.stdout + result.stderr
    assert "System check identified no issues" in result.stdout


def test_it_fails_the_deploy_check_in_the_embedded_default() -> None:
    """The check above can fail: without a secret key the embedded default is not deployable."""
    env = {"PATH": os.environ["PATH"], "HOME": os.environ.get("HOME", "/tmp")}
    result = manage("check", "--deploy", "--fail-level", "WARNING", env=env)
    assert result.returncode != 0
    assert "security.W018" in result.stderr + result.stdout  # DEBUG on


def test_it_publishes_an_openapi_schema_that_validates_without_warnings() -> None:
    result = manage("spectacular", "--validate", "--fail-on-warn", "--file", os.devnull, env=production_env())
    assert result.returncode == 0, result.stderr
