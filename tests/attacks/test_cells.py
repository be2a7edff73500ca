"""Issue 30, the cell side: what a valid key can send to make one measurement look like many
machines, or an impossible number look like evidence. Each attack runs over HTTP against the live
server and must change no verdict, no ranking position and no default model."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from benchhub_protocol import envelope
from django.utils import timezone

from benchhub.accounts.models import PublicKey
from benchhub.results import cells
from benchhub.web.choices import campaign_choices, model_choices
from tests.attacks.conftest import Attacker, fresh_key
from tests.conftest import build_payload

pytestmark = pytest.mark.django_db(transaction=True)

SIZES = (2, 3, 4, 5, 8)
BOARD = {"campaign": "mv-ext-iquants", "variant": "01"}


def crowd_run(baseline: float, ratio: float) -> dict[str, dict[int, list[float]]]:
    return {
        "upstream": {size: [baseline, baseline * 1.001] for size in SIZES},
        "01": {size: [baseline * ratio, baseline * ratio * 1.001] for size in SIZES},
    }


@pytest.fixture
def honest(attacker: Attacker, settings: Any) -> Iterator[list[envelope.Signer]]:
    """Ten machines of ten contributors on two chips, each on its own network, registered two days
    ago: an M5 Pro crowd that sees no change and an M1 crowd that sees +10%."""
    settings.BENCHHUB_KEY_PROBATION_S = 86400
    keys = []
    for n in range(10):
        key = fresh_key(f"honest-{n}")
        assert attacker.register(key, f"honest-{n}", f"198.18.{n}.1").status_code == 201
        keys.append(key)
    PublicKey.objects.update(created_at=timezone.now() - timedelta(days=2))
    for n, key in enumerate(keys):
        chip = "Apple M5 Pro" if n < 6 else "Apple M1"
        ratio = (1.0 + (n % 3 - 1) * 0.004) if n < 6 else 1.10 + (n % 2) * 0.01
        answer = attacker.submit(build_payload(tg=crowd_run(100 + n, ratio), machine={"chip": chip}), key)
        assert answer.status_code == 201, answer.text
    cells.refresh_all_cells()
    yield keys


def board(attacker: Attacker) -> dict[tuple[str, str, int], tuple[str, int, float]]:
    rows = attacker.get("/api/v1/leaderboard/", BOARD).json()["rows"]
    return {
        (row["chip"], row["model_sha256"], row["batch_size"]): (row["verdict"], row["n_machines"], row["speedup"])
        for row in rows
        if row["n_machines"]
    }


def ranking(attacker: Attacker) -> list[str]:
    """The chips in the order the home page ranks them."""
    page = attacker.get("/").text
    return sorted(("Apple M5 Pro", "Apple M1"), key=page.index)


def default_model() -> str:
    return model_choices(campaign_choices()[0])[0].sha256


def test_one_key_claiming_23_memory_sizes_is_one_machine(attacker: Attacker, honest: list[envelope.Signer]) -> None:
    before = board(attacker)
    liar = honest[0]
    for n in range(23):
        payload = build_payload(tg=crowd_run(200 + n, 1.3), machine={"memory_bytes": (n + 1) * 2**30})
        assert attacker.submit(payload, liar).status_code == 201
    cells.refresh_all_cells()
    after = board(attacker)
    m5 = [key for key in after if key[0] == "Apple M5 Pro"]
    assert {after[key][1] for key in m5} == {6}, "still six machines"
    # One machine at +30% among five at none: never "faster"; the cell may say the machines disagree.
    assert {after[key][0] for key in m5} <= {"within", "unclear", "varies by machine"}, "never faster"
    assert {key: value[:2] for key, value in before.items() if key[0] == "Apple M1"} == {
        key: value[:2] for key, value in after.items() if key[0] == "Apple M1"
    }


def test_a_measurement_resigned_under_five_fresh_keys_counts_once(
    attacker: Attacker, honest: list[envelope.Signer]
) -> None:
    original = build_payload(tg=crowd_run(300, 1.2))
    first = attacker.submit(original, honest[1]).json()["id"]
    for n in range(5):
        thief = fresh_key(f"thief-{n}")
        assert attacker.register(thief, f"thief-{n}", f"198.19.{n}.1").status_code == 201
        copy = {**original, "nonce": f"{n:032x}"}
        answer = attacker.submit(copy, thief)
        assert answer.status_code == 409, answer.text
        assert (answer.json()["error"], answer.json()["submission"]) == ("duplicate_measurement", first)


def test_25_keys_from_one_24_and_25_from_one_64_change_no_verdict_ranking_or_default_model(
    attacker: Attacker, honest: list[envelope.Signer]
) -> None:
    before = (board(attacker), ranking(attacker), default_model())
    forged = crowd_run(148, 2.7)
    registered = 0
    for n in range(50):
        address = f"203.0.113.{n + 1}" if n < 25 else f"2001:db8:5:6::{n:x}"
        key = fresh_key(f"sybil-{n}")
        if attacker.register(key, f"sybil-{n}", address).status_code != 201:
            continue
        registered += 1
        for model in ({}, {"sha256": "5" * 64, "label": "Sybil model"}):  # a verdict, and the default model
            for chip in ("Apple M5 Pro", "Apple M1"):
                payload = build_payload(tg=forged, machine={"chip": chip}, model=model)
                assert attacker.submit(payload, key, address).status_code == 201
    cells.refresh_all_cells()
    assert registered == 20, "ten a network an hour"
    assert (board(attacker), ranking(attacker), default_model()) == before
    rows = attacker.get("/api/v1/leaderboard/", {**BOARD, "chip": "Apple M5 Pro", "batch_size": 4}).json()["rows"]
    assert {row["model_sha256"]: row["n_pending"] for row in rows}["b" * 64] == 20


def test_a_speedup_beyond_the_campaigns_range_and_a_rate_beyond_physics_wait_for_a_moderator(
    attacker: Attacker, honest: list[envelope.Signer]
) -> None:
    before = (board(attacker), ranking(attacker))
    attacker.submit(build_payload(tg=crowd_run(100, 9.9), machine={"chip": "Apple M1"}), honest[7])
    impossible = build_payload(tg=crowd_run(5_000_000, 1.5), machine={"chip": "Apple M1"})
    assert attacker.submit(impossible, honest[8]).status_code == 201
    cells.refresh_all_cells()
    assert (board(attacker), ranking(attacker)) == before
    rows = attacker.get("/api/v1/leaderboard/", {**BOARD, "chip": "Apple M1", "batch_size": 4}).json()["rows"]
    assert rows[0]["excluded"]["held"] == 2


def test_the_first_claim_on_a_model_file_does_not_win(attacker: Attacker, honest: list[envelope.Signer]) -> None:
    wrong = {"sha256": "7" * 64, "file_type": "Q8_0"}
    attacker.submit(build_payload(tg=crowd_run(100, 1.2), model=wrong), honest[0])
    for key in honest[1:4]:
        attacker.submit(build_payload(tg=crowd_run(100, 1.2), model={"sha256": "7" * 64}), key)
    cells.refresh_all_cells()
    rows = attacker.get("/api/v1/leaderboard/", {**BOARD, "model": "7" * 64, "batch_size": 4}).json()["rows"]
    assert [(row["quant"], row["n_machines"], row["excluded"]["held"]) for row in rows] == [("IQ2_XXS", 3, 1)]


@pytest.mark.parametrize(
    ("change", "error"),
    [
        ({"tg": {"upstream": {4: [100.0] * 100}, "01": {4: [120.0] * 100}}}, "too_many_rounds"),
        ({"created_at": "2099-01-01T00:00:00Z"}, "created_in_future"),
    ],
)
def test_a_payload_beyond_the_protocols_bounds_is_refused(
    attacker: Attacker, honest: list[envelope.Signer], change: dict[str, Any], error: str
) -> None:
    payload = build_payload(tg=change.get("tg"))
    if "created_at" in change:
        payload["created_at"] = change["created_at"]
    answer = attacker.submit(payload, honest[0])
    assert (answer.status_code, answer.json()["error"]) == (400, error)
