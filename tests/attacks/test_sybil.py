"""Issue 30, point 3: keys cost a network. Registrations are limited per IPv4 /24, per IPv6 /64 and
/48 and for everyone together, and a moderator retires a network's keys in one audited action,
after which their results are in no cell."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from benchhub_protocol.payloads import signed_withdrawal
from django.contrib.auth.models import User
from django.core.management import call_command
from django.utils import timezone

from benchhub.accounts.models import ModerationEvent, PublicKey
from benchhub.results import cells
from benchhub.results.models import Submission
from tests.attacks.conftest import Attacker, fresh_key
from tests.conftest import build_payload, persona

pytestmark = pytest.mark.django_db(transaction=True)


def _register_many(attacker: Attacker, addresses: list[str], tag: str) -> list[int]:
    return [
        attacker.register(fresh_key(f"{tag}-{n}"), f"{tag}-{n}", address).status_code
        for n, address in enumerate(addresses)
    ]


def test_sybil_25_keys_from_one_ipv4_24_get_10_and_then_429(attacker: Attacker) -> None:
    statuses = _register_many(attacker, [f"203.0.113.{n + 1}" for n in range(25)], "v4")
    assert statuses == [201] * 10 + [429] * 15
    assert attacker.register(fresh_key("elsewhere"), "elsewhere", "198.51.100.9").status_code == 201
    assert set(PublicKey.objects.values_list("registered_network", flat=True)) == {
        "203.0.113.0/24",
        "198.51.100.0/24",
    }


def test_sybil_25_keys_from_one_ipv6_64_get_10_and_then_429(attacker: Attacker) -> None:
    statuses = _register_many(attacker, [f"2001:db8:1:2::{n + 1:x}" for n in range(25)], "v6")
    assert statuses == [201] * 10 + [429] * 15
    assert PublicKey.objects.filter(registered_network="2001:db8:1:2::/64").count() == 10


def test_sybil_keys_from_many_ipv6_64s_of_one_48_get_10_and_then_429(attacker: Attacker) -> None:
    statuses = _register_many(attacker, [f"2001:db8:7:{n:x}::1" for n in range(15)], "wide")
    assert statuses == [201] * 10 + [429] * 5


def test_sybil_keys_from_many_networks_stop_at_the_global_ceiling(attacker: Attacker, settings: Any) -> None:
    settings.BENCHHUB_THROTTLE_REGISTRATIONS = "20/hour"
    refused_by_network = _register_many(attacker, ["192.0.2.1"] * 15, "loud")  # spends none of the ceiling
    assert refused_by_network == [201] * 10 + [429] * 5
    statuses = _register_many(attacker, [f"198.18.{n}.1" for n in range(15)], "spread")
    assert statuses == [201] * 10 + [429] * 5  # 10 + 10 = the ceiling of 20


def test_a_retired_networks_keys_leave_every_cell_and_can_neither_submit_nor_withdraw(attacker: Attacker) -> None:
    honest = persona("ada")
    assert attacker.register(honest, "ada", "192.0.2.50").status_code == 201
    assert attacker.submit(build_payload(), honest, "192.0.2.50").status_code == 201
    forged = {"upstream": {4: [148, 148]}, "01": {4: [400, 400]}}  # 2.7x: every Sybil says "much faster"
    sybils = [fresh_key(f"sybil-{n}") for n in range(5)]
    ids = []
    for n, key in enumerate(sybils):
        assert attacker.register(key, f"sybil-{n}", f"203.0.113.{n + 1}").status_code == 201
        answer = attacker.submit(build_payload(tg=forged, machine={"memory_bytes": (n + 1) * 2**30}), key)
        assert answer.status_code == 201, answer.text
        ids.append(answer.json()["id"])
    cells.refresh_all_cells()
    board = {"campaign": "mv-ext-iquants", "variant": "01", "batch_size": 4}
    assert attacker.get("/api/v1/leaderboard/", board).json()["rows"][0]["n_contributors"] == 6

    User.objects.create_superuser("mod", "mod@example.org", "pw")
    now = timezone.now()
    call_command(
        "retire_keys",
        network="203.0.113.0/24",
        since=(now - timedelta(hours=1)).isoformat(),
        until=(now + timedelta(minutes=1)).isoformat(),
        reason="Sybil keys, one /24",
        actor="mod",
    )
    cells.refresh_all_cells()  # what the queued refreshes do in the worker
    [row] = attacker.get("/api/v1/leaderboard/", board).json()["rows"]
    assert (row["n_contributors"], row["speedup"]) == (1, pytest.approx(210 / 148, rel=1e-3))
    assert Submission.objects.filter(pk__in=ids, hidden=True).count() == 5
    assert ModerationEvent.objects.filter(action="retire_key").count() == 5
    again = attacker.submit(build_payload(tg=forged), sybils[0])
    assert (again.status_code, again.json()["error"]) == (403, "key_banned")
    withdrawn = attacker.post(f"/api/v1/submissions/{ids[0]}/withdraw", signed_withdrawal(ids[0], sybils[0]))
    assert (withdrawn.status_code, withdrawn.json()["error"]) == (403, "key_banned")
