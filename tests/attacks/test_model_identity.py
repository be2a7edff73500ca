"""Issue 41: which model file a page is about. Each attack of the issue, rerun over HTTP against the
live server with probation on (86400 s) and clients on networks of their own (the trusted proxy's
X-Forwarded-For): a claim about a file counts only with standing, and a newcomer's conflict holds
the newcomer, never the established rows."""

from __future__ import annotations

import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from typing import Any

import pytest
from benchhub_protocol import envelope
from django.db import connection
from django.utils import timezone

from benchhub.accounts.models import PublicKey
from benchhub.results import cells, tasks
from benchhub.results.models import Submission
from tests.attacks.conftest import Attacker, fresh_key
from tests.conftest import build_payload

pytestmark = pytest.mark.django_db(transaction=True)

SIZES = (2, 3, 4, 5, 8)
BOARD = {"campaign": "mv-ext-iquants", "variant": "01"}
OTHER_SIZE = {"size_bytes": 700_000_001}
RENAMED = {"file_type": "Q4_K_M", "size_bytes": 690_000_000, "label": "Totally-different 1.7B Q4_K_M"}


def crowd_run(baseline: float, ratio: float) -> dict[str, dict[int, list[float]]]:
    return {
        "upstream": {size: [baseline, baseline * 1.001] for size in SIZES},
        "01": {size: [baseline * ratio, baseline * ratio * 1.001] for size in SIZES},
    }


def register(attacker: Attacker, name: str, address: str, days_old: float = 0) -> envelope.Signer:
    key = fresh_key(name)
    assert attacker.register(key, name, address).status_code == 201
    if days_old:
        PublicKey.objects.filter(keyid=key.keyid).update(created_at=timezone.now() - timedelta(days=days_old))
    return key


def settle() -> None:
    """What the worker and the sweeper do with the queued refreshes and the file's claims."""
    tasks.requeue_stale_submissions()
    cells.refresh_all_cells()


def board(attacker: Attacker) -> dict[tuple[str, int], tuple[Any, ...]]:
    rows = attacker.get("/api/v1/leaderboard/", BOARD).json()["rows"]
    return {
        (row["chip"], row["batch_size"]): (
            row["verdict"],
            row["n_machines"],
            row["speedup"],
            row["model"],
            row["quant"],
        )
        for row in rows
    }


@pytest.fixture
def honest(attacker: Attacker, settings: Any) -> Iterator[list[envelope.Signer]]:
    """Four machines past probation, each on its own network, that see +10% on an M4 Pro."""
    settings.BENCHHUB_KEY_PROBATION_S = 86400
    keys = [register(attacker, f"honest-{n}", f"198.18.{n}.1", days_old=2) for n in range(4)]
    for n, key in enumerate(keys):
        payload = build_payload(tg=crowd_run(100 + n, 1.10 + n * 0.002), machine={"chip": "Apple M4 Pro"})
        assert attacker.submit(payload, key, f"198.18.{n}.1").status_code == 201
    settle()
    before = board(attacker)
    assert before[("Apple M4 Pro", 4)][:2] == ("faster", 4)
    yield keys


def test_two_fresh_keys_with_another_size_change_no_cell(attacker: Attacker, honest: list[envelope.Signer]) -> None:
    before = board(attacker)
    for n, ratio in enumerate((1.0, 9.0)):  # the second one also quarantined
        key = register(attacker, f"fresh-{n}", f"203.0.113.{n + 1}")
        payload = build_payload(tg=crowd_run(150, ratio), machine={"chip": "Apple M4 Pro"}, model=OTHER_SIZE)
        assert attacker.submit(payload, key, f"203.0.113.{n + 1}").status_code == 201
    settle()
    assert board(attacker) == before
    assert Submission.objects.filter(model_held=True).count() == 2
    assert not Submission.objects.filter(key__keyid__in=[key.keyid for key in honest], model_held=True).exists()


def test_a_fresh_key_on_another_chip_holds_nothing_of_this_chip(
    attacker: Attacker, honest: list[envelope.Signer]
) -> None:
    before = board(attacker)
    key = register(attacker, "m1-liar", "203.0.113.9")
    payload = build_payload(tg=crowd_run(80, 1.0), machine={"chip": "Apple M1"}, model=OTHER_SIZE)
    assert attacker.submit(payload, key, "203.0.113.9").status_code == 201
    settle()
    after = board(attacker)
    assert {k: v for k, v in after.items() if k[0] == "Apple M4 Pro"} == before


def test_three_sybils_of_one_network_rename_nothing_before_or_after_their_probation(
    attacker: Attacker, settings: Any
) -> None:
    settings.BENCHHUB_KEY_PROBATION_S = 86400
    solo = register(attacker, "solo", "198.18.20.1", days_old=3)
    assert attacker.submit(build_payload(tg=crowd_run(100, 1.1)), solo, "198.18.20.1").status_code == 201
    settle()
    before = board(attacker)
    assert before[("Apple M5 Pro", 4)][1:] == (1, pytest.approx(1.1005, rel=1e-3), "Qwen3-1.7B UD-IQ2_XXS", "IQ2_XXS")
    sybils = [register(attacker, f"sybil-{n}", f"203.0.113.{n + 1}") for n in range(3)]
    for n, key in enumerate(sybils):
        payload = build_payload(tg=crowd_run(100 + n, 0.8), model=RENAMED)
        assert attacker.submit(payload, key, f"203.0.113.{n + 1}").status_code == 201
    settle()
    assert board(attacker) == before, "on probation"
    PublicKey.objects.filter(keyid__in=[key.keyid for key in sybils]).update(
        created_at=timezone.now() - timedelta(days=2)
    )
    settle()
    assert board(attacker) == before, "past probation: three keys of one /24 weigh one, and the incumbent keeps a tie"
    assert Submission.objects.filter(model_held=True).count() == 3


def test_a_first_claimant_without_the_file_is_outweighed_by_two_honest_networks(
    attacker: Attacker, settings: Any
) -> None:
    settings.BENCHHUB_KEY_PROBATION_S = 86400
    squatter = register(attacker, "squatter", "203.0.113.5", days_old=5)
    assert (
        attacker.submit(build_payload(tg=crowd_run(100, 1.3), model=RENAMED), squatter, "203.0.113.5").status_code
        == 201
    )
    settle()
    assert board(attacker)[("Apple M5 Pro", 4)][3:] == ("Totally-different 1.7B Q4_K_M", "Q4_K_M")
    for n in range(2):
        key = register(attacker, f"owner-{n}", f"198.18.3{n}.1", days_old=2)
        assert attacker.submit(build_payload(tg=crowd_run(110 + n, 1.1)), key, f"198.18.3{n}.1").status_code == 201
    settle()
    row = board(attacker)[("Apple M5 Pro", 4)]
    assert row[1:] == (2, pytest.approx(1.1005, rel=1e-3), "Qwen3-1.7B UD-IQ2_XXS", "IQ2_XXS")


def _deadlocks() -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_stat_clear_snapshot()")
        cursor.execute("SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()")
        return int(cursor.fetchone()[0])


def test_parallel_uploads_to_a_disputed_file_never_fail_nor_deadlock(
    attacker: Attacker, honest: list[envelope.Signer]
) -> None:
    assert connection.vendor == "postgresql", "the deadlock count is PostgreSQL's"
    liar = register(attacker, "disputer", "203.0.113.7")
    assert attacker.submit(build_payload(model=OTHER_SIZE), liar, "203.0.113.7").status_code == 201
    keys = [(register(attacker, f"uploader-{n}", f"198.51.100.{n + 1}"), f"198.51.100.{n + 1}") for n in range(3)]
    before = _deadlocks()

    def upload(job: int) -> int:
        key, address = keys[job % 3]
        model = OTHER_SIZE if job % 2 else {}
        payload = build_payload(tg=crowd_run(90 + job, 1.05), model=model, machine={"chip": "Apple M4 Pro"})
        return attacker.submit(payload, key, address).status_code  # the fixture's post fails on any 5xx

    with ThreadPoolExecutor(max_workers=6) as pool:
        statuses = list(pool.map(upload, range(24)))
    time.sleep(1.0)  # PostgreSQL publishes its counters within a second
    assert statuses == [201] * 24
    assert _deadlocks() == before


def test_a_mixture_of_experts_at_a_real_speed_counts(attacker: Attacker, honest: list[envelope.Signer]) -> None:
    moe = {
        "sha256": "d" * 64,
        "file_name": "Qwen3-30B-A3B-Q4_K_M.gguf",
        "label": "Qwen3-30B-A3B Q4_K_M",
        "architecture": "qwen3moe",
        "n_params": 30_532_122_624,
        "file_type": "Q4_K_M",
        "size_bytes": 18_556_686_400,
        "tensor_bytes_by_type": {"F32": 200_000_000, "Q4_K": 15_000_000_000, "Q6_K": 3_350_000_000},
        "expert_count": 128,
        "expert_used_count": 8,
    }
    at_70 = {"upstream": {1: [70.0, 70.2]}, "01": {1: [73.5, 73.4]}}
    answer = attacker.submit(build_payload(tg=at_70, model=moe, machine={"chip": "Apple M4 Max"}), honest[0])
    assert (answer.status_code, answer.json()["status"]) == (201, "accepted")
    impossible = {"upstream": {1: [5e6, 5e6]}, "01": {1: [5.1e6, 5e6]}}
    answer = attacker.submit(build_payload(tg=impossible, model=moe, machine={"chip": "Apple M4 Max"}), honest[1])
    assert "quarantined" in Submission.objects.get(pk=answer.json()["id"]).flags


def test_a_stored_envelope_nudged_by_a_hundredth_under_a_fresh_key_gets_409(
    attacker: Attacker, honest: list[envelope.Signer]
) -> None:
    stored = Submission.objects.order_by("received_at").first()
    assert stored is not None
    payload = envelope.parse_canonical_payload(
        envelope.open_envelope(envelope.strict_loads(bytes(stored.raw.body)), envelope.SUBMISSION_TYPE).payload
    )
    payload["nonce"] = "e" * 32
    payload["sweep"]["runs"][0]["rows"][0]["tg_tps"] += 0.01
    thief = register(attacker, "thief", "192.0.2.77")
    answer = attacker.submit(payload, thief, "192.0.2.77")
    assert (answer.status_code, answer.json()["error"], answer.json()["submission"]) == (
        409,
        "duplicate_measurement",
        str(stored.id),
    )
