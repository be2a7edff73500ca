"""Item 2 of the issue, and issue 25's fail-closed start: the documented production settings
(.env.example) give a clean `check --deploy`, behind a TLS proxy too; without a secret key, or with
the placeholder, nothing starts unless DEBUG is asked for; the OpenAPI schema validates."""

from __future__ import annotations

import json
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


def bare_env(**variables: str) -> dict[str, str]:
    """Only what is named: not the suite's own DJANGO_DEBUG=1."""
    return {"PATH": os.environ["PATH"], "HOME": os.environ.get("HOME", "/tmp"), **variables}


def documented_production_settings() -> dict[str, str]:
    """.env.example's variables as docker-compose.yml passes them, with a key of one's own."""
    lines = (ROOT / ".env.example").read_text().splitlines()
    documented = dict(line.split("=", 1) for line in lines if line and not line.startswith("#"))
    return documented | {"DJANGO_SECRET_KEY": secrets.token_urlsafe(50)}


def production_env() -> dict[str, str]:
    return bare_env(
        **documented_production_settings(),
        DATABASE_URL=os.environ.get("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/postgres"),
        REDIS_URL=os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0"),
    )


def test_it_passes_the_deploy_check_with_the_documented_production_settings() -> None:
    env = production_env()
    assert env["DJANGO_SECURE_PROXY_SSL_HEADER"] == "true"  # the compose stack sits behind a TLS proxy
    result = manage("check", "--deploy", "--fail-level", "WARNING", env=env)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "System check identified no issues" in result.stdout


def test_it_passes_the_deploy_check_without_a_proxy_too() -> None:
    env = production_env()
    del env["DJANGO_SECURE_PROXY_SSL_HEADER"]
    result = manage("check", "--deploy", "--fail-level", "WARNING", env=env)
    assert result.returncode == 0, result.stdout + result.stderr


PROXIED = """
import json, django
django.setup()
from django.test import Client
client = Client(HTTP_HOST="benchhub.example.org")
answers = {}
for name, headers in {"plain": {}, "forwarded_https": {"HTTP_X_FORWARDED_PROTO": "https"}}.items():
    response = client.get("/api/v1/schema/", **headers)  # no database, no static files
    answers[name] = [response.status_code, response.get("Location")]
print(json.dumps(answers))
"""


def _proxied(env: dict[str, str]) -> dict[str, list[object]]:
    env = {**env, "PYTHONPATH": str(ROOT), "DJANGO_SETTINGS_MODULE": "benchhub.settings"}
    done = subprocess.run([sys.executable, "-c", PROXIED], cwd=ROOT, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    answers: dict[str, list[object]] = json.loads(done.stdout.strip().splitlines()[-1])
    return answers


def test_it_trusts_x_forwarded_proto_only_when_told_a_proxy_sets_it() -> None:
    behind_proxy = _proxied(production_env())
    assert behind_proxy["plain"] == [301, "https://benchhub.example.org/api/v1/schema/"]
    assert behind_proxy["forwarded_https"][0] == 200
    without = production_env()
    del without["DJANGO_SECURE_PROXY_SSL_HEADER"]
    assert _proxied(without)["forwarded_https"] == [301, "https://benchhub.example.org/api/v1/schema/"]


def test_it_refuses_to_start_without_a_secret_key_unless_debug_is_asked_for() -> None:
    for env in (bare_env(), bare_env(DJANGO_DEBUG="0")):
        result = manage("check", env=env)
        assert result.returncode != 0
        assert "DJANGO_SECRET_KEY is not set" in result.stderr, result.stderr[-2000:]
    assert manage("check", env=bare_env(DJANGO_DEBUG="1")).returncode == 0


def test_it_refuses_the_placeholder_key_of_env_example() -> None:
    lines = (ROOT / ".env.example").read_text().splitlines()
    [placeholder] = [line.split("=", 1)[1] for line in lines if line.startswith("DJANGO_SECRET_KEY=")]
    for debug in ("0", "1"):
        result = manage("check", env={**production_env(), "DJANGO_SECRET_KEY": placeholder, "DJANGO_DEBUG": debug})
        assert result.returncode != 0
        assert "placeholder" in result.stderr, result.stderr[-2000:]


def test_it_fails_the_deploy_check_in_the_embedded_default() -> None:
    """The checks above can fail: the development default is not deployable."""
    result = manage("check", "--deploy", "--fail-level", "WARNING", env=bare_env(DJANGO_DEBUG="1"))
    assert result.returncode != 0
    assert "security.W018" in result.stderr + result.stdout  # DEBUG on


def test_it_publishes_an_openapi_schema_that_validates_without_warnings() -> None:
    result = manage("spectacular", "--validate", "--fail-on-warn", "--file", os.devnull, env=production_env())
    assert result.returncode == 0, result.stderr
