"""Whole rotation cycles (docs/protocol.md section 7): which rounds count, and the median over cycles."""

from __future__ import annotations

import math
import random
from typing import Any

import pytest
from benchhub_protocol.cycles import balanced_spread, submission_estimate, submission_estimates, whole_cycles

ORDER = (("A", "B"), ("B", "A"))


def _runs(speeds: list[dict[str, float]], orders: list[tuple[str, ...]] | None = None) -> list[dict[str, Any]]:
    """One run a variant a round; round r runs in orders[r] (the rotation by default)."""
    runs, seq = [], 0
    for rep, by_variant in enumerate(speeds, start=1):
        names = tuple(by_variant)
        order = orders[rep - 1] if orders else names[(rep - 1) % len(names) :] + names[: (rep - 1) % len(names)]
        for name in order:
            seq += 1
            rows = [{"batch_size": 1, "pp_tps": 1.0, "tg_tps": by_variant[name], "t_pp_s": 1.0, "t_tg_s": 1.0}]
            runs.append({"variant": name, "rep": rep, "seq": seq, "exit_code": 0, "rows": rows})
    return runs


def test_it_counts_only_whole_cycles() -> None:
    runs = _runs([{"A": 100, "B": 110}] * 5)
    assert whole_cycles(runs) == [(1, 2), (3, 4)]  # round 5 starts a cycle it never finished
    found = submission_estimate(runs, "B", "A", 1)
    assert found is not None and found.n_cycles == 2 and found.ratio == pytest.approx(1.1)


def test_it_leaves_out_a_block_that_does_not_rotate() -> None:
    runs = _runs([{"A": 100, "B": 110}] * 4, orders=[("A", "B")] * 4)
    assert whole_cycles(runs) == []
    assert submission_estimate(runs, "B", "A", 1) is None


def test_a_position_slowdown_cancels_within_a_cycle() -> None:
    # Whoever runs second loses 3%: identical code reads 1.0 over each cycle.
    runs = []
    for rep in range(1, 7):
        first, second = ("A", "B") if rep % 2 else ("B", "A")
        for seq, (name, speed) in enumerate(((first, 100.0), (second, 97.0))):
            rows = [{"batch_size": 1, "pp_tps": 1.0, "tg_tps": speed, "t_pp_s": 1.0, "t_tg_s": 1.0}]
            runs.append({"variant": name, "rep": rep, "seq": 2 * rep + seq, "exit_code": 0, "rows": rows})
    found = submission_estimate(runs, "B", "A", 1)
    assert found is not None and found.ratio == pytest.approx(1.0)


def test_one_disturbed_round_moves_the_median_of_cycles_little() -> None:
    speeds = [{"A": 70.0, "B": 70.0 * 1.01} for _ in range(12)]
    speeds[4]["A"] = 22.8  # other load slowed one upstream round
    found = submission_estimate(_runs(speeds), "B", "A", 1)
    assert found is not None and found.n_cycles == 6
    assert found.ratio == pytest.approx(1.01, rel=1e-9)
    assert found.log_se is not None and found.df == 5


def test_the_standard_error_is_the_cycles_spread() -> None:
    ratios = [1.0, 1.02, 0.98, 1.01]
    speeds = [{"A": 100.0, "B": 100.0 * ratio} for ratio in ratios for _ in range(2)]
    found = submission_estimate(_runs(speeds), "B", "A", 1)
    assert found is not None and found.n_cycles == 4
    logs = [math.log(ratio) for ratio in ratios]
    mean = sum(logs) / 4
    sd = math.sqrt(sum((value - mean) ** 2 for value in logs) / 3)
    assert found.log_se == pytest.approx(math.sqrt(math.pi / 2) * sd / 2)


def _one_cycle_with_a_slow_middle(noise: dict[tuple[str, int], float]) -> list[dict[str, Any]]:
    """One cycle of three variants (rotations of A B C): whoever runs in the middle loses 3%, and each
    run's speed is off by its own factor in `noise` (variant, rep)."""
    speeds = [{"A": 100.0, "B": 100.0, "C": 100.0} for _ in range(3)]
    runs = _runs(speeds)
    for run in runs:
        position = (run["seq"] - 1) % 3
        factor = (0.97 if position == 1 else 1.0) * noise.get((run["variant"], run["rep"]), 1.0)
        run["rows"][0]["tg_tps"] *= factor
    return runs


def test_one_cycle_s_error_leaves_out_what_the_cycle_cancels() -> None:
    # A slow middle position and no other noise: the cycle's ratio is exactly 1 and carries no error,
    # though its rounds' ratios differ by 3% (the rounds' spread would have counted it as noise).
    found = submission_estimate(_one_cycle_with_a_slow_middle({}), "B", "A", 1)
    assert found is not None and found.n_cycles == 1 and found.ratio == pytest.approx(1.0)
    assert found.df == 2 and found.log_se is not None and found.log_se < 1e-12
    # With noise, the error is the residual per-process spread after round, variant and position, as a
    # mean of 3 round differences carries it: the same whatever the position's slowdown.
    noise = {("B", 1): 1.02, ("A", 2): 0.99, ("C", 3): 1.015}
    with_slow_middle = submission_estimate(_one_cycle_with_a_slow_middle(noise), "B", "A", 1)
    runs = _one_cycle_with_a_slow_middle(noise)
    for run in runs:
        if (run["seq"] - 1) % 3 == 1:
            run["rows"][0]["tg_tps"] /= 0.97
    without = submission_estimate(runs, "B", "A", 1)
    assert with_slow_middle is not None and without is not None and with_slow_middle.log_se is not None
    assert with_slow_middle.log_se > 0.001 and with_slow_middle.log_se == pytest.approx(without.log_se, rel=1e-9)


def test_one_cycle_of_two_variants_falls_back_to_its_rounds_spread() -> None:
    found = submission_estimate(_runs([{"A": 100.0, "B": 103.0}, {"A": 100.0, "B": 99.0}]), "B", "A", 1)
    assert found is not None and found.n_cycles == 1 and found.df == 1
    logs = [math.log(1.03), math.log(0.99)]
    assert found.log_se == pytest.approx(abs(logs[0] - logs[1]) / math.sqrt(2) / math.sqrt(2))


def test_every_cell_s_one_cycle_error_is_balanced_spread_of_its_cycle() -> None:
    """submission_estimates reads the runs once for all cells; each one-cycle cell's error must still
    be what balanced_spread (the agent's stop rule) finds for that cycle and batch size alone."""
    sizes = (1, 2, 4)
    runs, seq = [], 0
    names = ("A", "B", "C")
    noise = random.Random(5)
    for rep in range(1, 5):  # one whole cycle of three rounds, then a round that counts nowhere
        order = names[(rep - 1) % 3 :] + names[: (rep - 1) % 3]
        for position, name in enumerate(order):
            seq += 1
            rows = [
                {
                    "batch_size": size,
                    "pp_tps": 1.0,
                    "tg_tps": 100.0 * noise.uniform(0.95, 1.05) - position,
                }
                for size in sizes
            ]
            runs.append({"variant": name, "rep": rep, "seq": seq, "exit_code": 0, "rows": rows})
    found = submission_estimates(runs, "A")
    cycle = [run for run in runs if run["rep"] <= 3]
    for variant in ("B", "C"):
        for size in sizes:
            fitted = balanced_spread(cycle, size)
            assert fitted is not None and fitted[0] > 0.001
            estimate = found[(variant, size)]
            assert estimate.n_cycles == 1 and estimate.df == fitted[1]
            assert estimate.log_se == pytest.approx(fitted[0] * math.sqrt(2 / 3), rel=1e-12)
