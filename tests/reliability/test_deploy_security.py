"""Issue 7, item 9 (beyond tests/server/test_deploy.py's `check --deploy`): under production
variables the responses carry the security headers, plain HTTP is redirected, the admin login
enforces CSRF, and neither error pages nor logs reveal the secret key or the database password,
even when the database is unreachable and every page fails."""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


def probe(static_root: Path) -> tuple[dict[str, Any], dict[str, str]]:
    env = {
        "PATH": os.environ["PATH"],
        "HOME": os.environ.get("HOME", "/tmp"),
        "PYTHONPATH": str(ROOT),
        "DJANGO_SETTINGS_MODULE": "benchhub.settings",
        "DJANGO_SECRET_KEY": secrets.token_urlsafe(50),
        "DJANGO_ALLOWED_HOSTS": "benchhub.example.org",
        # A password that must never be shown, on a database that does not exist.
        "DATABASE_URL": f"postgres://postgres:{secrets.token_hex(12)}@127.0.0.1:5432/benchhub_absent_{secrets.token_hex(4)}",
        "REDIS_URL": os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0"),
        "DJANGO_STATIC_ROOT": str(static_root),
    }
    # As the compose web command does: without the manifest every page that links a static file fails.
    collected = subprocess.run(
        [sys.executable, "manage.py", "collectstatic", "--noinput"], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert collected.returncode == 0, collected.stderr[-3000:]
    done = subprocess.run(
        [sys.executable, str(Path(__file__).with_name("deploy_probe.py"))],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1]), env


def test_it_serves_production_with_security_headers_csrf_and_no_secrets_shown(tmp_path: Path) -> None:
    found, env = probe(tmp_path / "static")
    headers = found["headers"]
    assert headers["Strict-Transport-Security"].startswith("max-age=31536000")
    assert headers["X-Content-Type-Options"] == "nosniff"
    assert headers["X-Frame-Options"] == "DENY"
    assert headers["Referrer-Policy"] == "same-origin"
    assert headers["Cross-Origin-Opener-Policy"] == "same-origin"
    assert "script-src 'self';" in headers["Content-Security-Policy"] + ";"
    assert found["plain_http"] == [301, "https://benchhub.example.org/"]
    assert found["admin_login_form"] == 200
    assert found["admin_post_without_csrf"] == 403
    assert "secure" in found["csrf_cookie_flags"].lower()
    assert found["failing_page"][0] == 500 and found["failing_api"][0] == 500
    assert json.loads(found["failing_api"][1])["error"] == "server_error"
    assert found["not_found"][0] == 404
    password = env["DATABASE_URL"].split(":")[2].split("@")[0]
    shown = found["failing_page"][1] + found["failing_api"][1] + found["not_found"][1] + found["logs"]
    assert "Traceback" not in found["failing_page"][1]
    assert "OperationalError" in found["logs"], "the failure was not logged at all"
    for secret in (env["DJANGO_SECRET_KEY"], password):
        assert secret not in shown
