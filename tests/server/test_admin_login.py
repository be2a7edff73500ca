"""Issue 25: admin login has a brute-force limit (django-axes). 25 wrong passwords in a row were
all processed; now the address is locked out after the limit, the right password included, and a
forged X-Forwarded-For buys no further attempts. Issue 30: the lock is the address's alone, so an
attacker's guesses never lock the admin out from their own address."""

from __future__ import annotations

from typing import Any

import pytest
from django.conf import settings
from django.contrib.auth.models import User
from django.core.cache import cache
from django.test import Client

pytestmark = pytest.mark.django_db

PASSWORD = "correct horse battery staple"


@pytest.fixture
def admin() -> User:
    cache.clear()
    return User.objects.create_superuser("admin", "admin@example.org", PASSWORD)


def _login(client: Client, password: str, address: str = "203.0.113.7", **headers: Any) -> int:
    response = client.post("/admin/login/", {"username": "admin", "password": password}, REMOTE_ADDR=address, **headers)
    return int(response.status_code)


def test_it_refuses_25_wrong_passwords_after_the_limit_and_then_the_right_one(admin: User) -> None:
    client = Client()
    limit = settings.AXES_FAILURE_LIMIT
    statuses = [_login(client, f"guess-{n}") for n in range(25)]
    assert statuses[: limit - 1] == [200] * (limit - 1)  # the form again, with its error
    assert statuses[limit:] == [429] * (25 - limit)
    assert _login(client, PASSWORD) == 429
    forged = {"HTTP_X_FORWARDED_FOR": "198.51.100.1"}
    assert _login(client, PASSWORD, **forged) == 429


def test_an_attackers_wrong_passwords_do_not_lock_the_admin_out_from_another_address(admin: User) -> None:
    client = Client()
    for n in range(settings.AXES_FAILURE_LIMIT + 3):
        _login(client, f"guess-{n}", address="198.51.100.66")
    assert _login(client, PASSWORD, address="198.51.100.66") == 429  # the attacker's address is locked
    assert _login(Client(), PASSWORD, address="192.0.2.99") == 302  # the admin's is not


def test_a_right_password_under_the_limit_logs_in_and_resets_the_count(admin: User) -> None:
    client = Client()
    for n in range(settings.AXES_FAILURE_LIMIT - 1):
        assert _login(client, f"guess-{n}") == 200
    assert _login(client, PASSWORD) == 302
    assert client.get("/admin/").status_code == 200
