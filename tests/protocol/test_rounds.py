from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from benchhub_agent.tools import parse_batched_bench_jsonl
from benchhub_protocol import cycles, distributions, rounds
from benchhub_protocol.rounds import HALF_WIDTH_TARGET, half_width, high_spread, ratio_interval, round_ratios

FIXTURES = Path(__file__).parent.parent / "agent" / "fixtures"
RUN = FIXTURES / "cuda-h200-run"


def _run(variant: str, rep: int, speeds: dict[int, float]) -> dict[str, Any]:
    rows = [{"batch_size": size, "tg_tps": tps} for size, tps in speeds.items()]
    return {"variant": variant, "rep": rep, "seq": 0, "exit_code": 0, "rows": rows}


def test_it_pairs_each_round_with_the_baseline_of_that_round() -> None:
    runs = [
        _run("A", 1, {4: 100.0}),
        _run("B", 1, {4: 110.0}),
        _run("B", 2, {4: 99.0}),
        _run("A", 2, {4: 90.0}),
        _run("B", 3, {4: 120.0}),  # its baseline run aborted before batch 4: nothing to pair
        _run("A", 3, {}),
    ]
    assert round_ratios(runs, "B", "A", 4) == [1.1, 1.1]


def test_it_gives_no_interval_below_two_rounds() -> None:
    assert ratio_interval([1.02]) is None and half_width([1.02]) is None


def test_it_computes_a_t_interval_on_log_ratios() -> None:
    ratios = [1.01, 0.99, 1.02, 0.98]
    logs = [math.log(r) for r in ratios]
    mean = sum(logs) / 4
    sd = math.sqrt(sum((x - mean) ** 2 for x in logs) / 3)
    low, high = ratio_interval(ratios) or (0.0, 0.0)
    assert math.isclose(math.log(high) - mean, distributions.t_quantile(0.975, 3) * sd / 2, rel_tol=1e-9)
    assert math.isclose(low * high, math.exp(2 * mean))
    # Symmetric in which build is called A: the interval of 1/ratio is the reciprocal interval.
    inverse = ratio_interval([1 / r for r in ratios]) or (0.0, 0.0)
    assert math.isclose(inverse[0], 1 / high) and math.isclose(inverse[1], 1 / low)


def _sweep(spread: float, n_rounds: int, seed: int = 1) -> dict[str, Any]:
    """Three identical builds in the agent's balanced order, each run's speed off by `spread` (log SD)."""
    import random

    rng = random.Random(seed)
    runs = []
    for index in range(n_rounds):
        for name in rounds.cycle_orders(["A", "B", "C"], seed, index // 3)[index % 3]:
            runs.append(_run(name, index + 1, {1: 100.0 * math.exp(rng.gauss(0, spread))}))
            runs[-1]["seq"] = len(runs)
    return {"batch_sizes": [1], "runs": runs}


def test_it_calls_the_spread_high_only_when_the_runs_spread_is_high() -> None:
    # Two rounds of a quiet machine are not "high spread", however wide their interval still is.
    quiet = _sweep(0.004, 2)
    assert not high_spread(quiet, "A") and not rounds.target_reached(quiet, "A", HALF_WIDTH_TARGET)
    assert not high_spread(_sweep(0.02, 30), "A")  # the H200's 2%
    assert high_spread(_sweep(0.08, 30), "A")
    assert rounds.HIGH_SPREAD == 0.05


def test_it_reaches_the_target_on_the_median_cell() -> None:
    assert rounds.target_half_width(0.02) == HALF_WIDTH_TARGET == 0.01
    assert rounds.target_half_width(0.05) == 0.025 and rounds.target_half_width(None) == 0.01
    assert rounds.target_reached(_sweep(0.005, 12), "A", 0.01)
    assert not rounds.target_reached(_sweep(0.05, 12), "A", 0.01)


def test_it_takes_position_effects_out_of_the_spread_and_the_centre() -> None:
    """A second position 3% slow (run 1 of the reference, 2.1%): balanced, it moves no ratio and widens nothing."""
    sweep = _sweep(0.0, 6)
    positions = cycles.run_positions(sweep["runs"])
    for run in sweep["runs"]:
        if positions[(run["variant"], run["rep"])] == 1:
            run["rows"][0]["tg_tps"] *= 0.97
    found = rounds.cell_estimate(sweep["runs"], "B", "A", 1)
    assert found is not None and found.ratio == pytest.approx(1.0) and (found.spread or 0) < 1e-9


def test_it_holds_1_in_the_recorded_h200_a_a_run() -> None:
    """A/A truth test. On CUDA the Metal patches compile to nothing: the three variants of the recorded
    H200 run are the same code, so every cell's true ratio is 1. Their medians differ by up to 7%; the
    round-paired interval must say "no clear change".

    18 cells at 95% each leave room for chance: if the intervals were exact and independent, more than
    two cells would exclude 1 with probability 5.8% (binomial, n=18, p=0.05). What was seen: 17 of 18
    hold 1; the one that does not (01 at batch 16, 0.892-0.984) is listed in docs/method.md."""
    sweep = json.loads((RUN / "payload.json").read_text())["sweep"]
    missed = []
    for variant in ("01", "01+02"):
        for size in sweep["batch_sizes"]:
            ratios = round_ratios(sweep["runs"], variant, "upstream", size)
            assert len(ratios) == 4
            low, high = ratio_interval(ratios) or (1.0, 1.0)
            if not low <= 1.0 <= high:
                missed.append((variant, size))
    assert len(missed) <= 2, missed
    assert missed == [("01", 16)]
    assert high_spread(sweep, "upstream")  # 4 rounds at this noise cannot reach ±1%: flagged, honestly


def test_it_holds_1_in_the_h200_a_a_experiment_where_one_binary_played_both_builds() -> None:
    """The A/A experiment behind the issue (fixtures/aa-h200/README.md): one binary as A and as B,
    interleaved, at four -ntg. 16 intervals (4 blocks x 4 batch sizes, all rounds of each block); more
    than two excluding 1 would happen by chance with probability 4.3% (binomial, n=16, p=0.05). Seen: one,
    -ntg 1024 at batch 2 (1.005-1.028), so that an A/A truth test of a single sweep can ask no more of a
    95% interval than what chance allows."""
    missed = []
    widths: dict[str, float] = {}
    for block in ("tg64", "tg256", "tg384", "tg1024c16k"):
        runs = []
        for path in sorted((FIXTURES / "aa-h200").glob(f"{block}_r*_*.jsonl")):
            rep, variant = path.stem.split("_")[1:]
            runs.append({"variant": variant, "rep": int(rep[1:]), "rows": parse_batched_bench_jsonl(path.read_text())})
        for size in (1, 2, 4, 8):
            ratios = round_ratios(runs, "B", "A", size)
            low, high = ratio_interval(ratios) or (1.0, 1.0)
            widths[f"{block} {size}"] = half_width(ratios) or 0.0
            if not low <= 1.0 <= high:
                missed.append((block, size))
    assert len(missed) <= 2 and missed == [("tg1024c16k", 2)]
    # Longer runs narrow the interval (docs/method.md: the -ntg to use when a campaign is opened).
    assert max(widths[f"tg1024c16k {s}"] for s in (1, 2, 4, 8)) < min(widths[f"tg64 {s}"] for s in (1, 2, 4, 8))
