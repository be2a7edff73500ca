"""Run under production variables by test_deploy_security.py (a separate process, since the
security settings are fixed when settings.py is imported). Prints one JSON object."""

from __future__ import annotations

import io
import json
import logging
import os
import secrets

import django

django.setup()

from django.test import Client  # noqa: E402 (after setup)

HOST = os.environ["DJANGO_ALLOWED_HOSTS"]
captured = io.StringIO()
logging.getLogger().addHandler(logging.StreamHandler(captured))
# An address of its own in 127.0.0.0/8: the suite's other requests, from 127.0.0.1 into the same
# Redis db, must not spend this probe's read throttle (it once answered 429 for the 500 it checks).
ADDRESS = "127." + ".".join(str(1 + secrets.randbelow(254)) for _ in range(3))
client = Client(raise_request_exception=False, HTTP_HOST=HOST, REMOTE_ADDR=ADDRESS)
strict = Client(enforce_csrf_checks=True, raise_request_exception=False, HTTP_HOST=HOST, REMOTE_ADDR=ADDRESS)

page = client.get("/api/v1/schema/", secure=True)
login_form = strict.get("/admin/login/", secure=True)
failing_page = client.get("/", secure=True)  # the database does not exist: a 500
failing_api = client.get("/api/v1/submissions/", secure=True)
not_found = client.get("/no/such/page/", secure=True)
print(
    json.dumps(
        {
            "headers": {
                name: page.get(name)
                for name in (
                    "Strict-Transport-Security",
                    "X-Content-Type-Options",
                    "X-Frame-Options",
                    "Referrer-Policy",
                    "Cross-Origin-Opener-Policy",
                    "Content-Security-Policy",
                )
            },
            "plain_http": [client.get("/").status_code, client.get("/").get("Location")],
            "admin_login_form": login_form.status_code,
            "admin_post_without_csrf": strict.post(
                "/admin/login/",
                {"username": "admin", "password": "x"},
                secure=True,
                HTTP_REFERER=f"https://{HOST}/admin/login/",
            ).status_code,
            "csrf_cookie_flags": str(login_form.cookies.get("csrftoken", "")),
            "failing_page": [failing_page.status_code, failing_page.content.decode(errors="replace")],
            "failing_api": [failing_api.status_code, failing_api.content.decode(errors="replace")],
            "not_found": [not_found.status_code, not_found.content.decode(errors="replace")],
            "logs": captured.getvalue(),
        }
    )
)
