"""scripts/recompute_cells.py computes cells without benchhub: its page_stats must give what
benchhub_protocol.stats.page_stats gives, field for field, on simulated pages of every kind."""

from __future__ import annotations

import dataclasses
import importlib.util
import math
import random
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from benchhub_protocol import cycles, distributions, meta, stats

from bench import validity_world as sim

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "recompute_cells.py"


def script() -> ModuleType:
    if "recompute_cells" not in sys.modules:
        spec = importlib.util.spec_from_file_location("recompute_cells", SCRIPT)
        assert spec and spec.loader
        module = importlib.util.module_from_spec(spec)
        sys.modules["recompute_cells"] = module
        spec.loader.exec_module(module)
    return sys.modules["recompute_cells"]


def same(ours: object, theirs: object) -> bool:
    if isinstance(ours, float) and isinstance(theirs, float):
        return math.isclose(ours, theirs, rel_tol=1e-12)
    return ours == theirs


WORLDS = [
    sim.World(1),
    sim.World(8, split=sim.Split(0.5, 0.04, -0.04)),
    sim.World(6, position=0.02, cycles=(1, 2), outliers=0.2),
    sim.World(2, effect=sim.constant(0.05)),
    sim.World(3, effect=sim.constant(0.08), machine_sd=0.0),
    sim.World(8, effect=sim.varying(0.10), skewed=True, miss=0.2),
    sim.World(25, effect=sim.constant(0.005)),
    sim.World(12, effect=sim.constant(-0.06), round_sd=0.05),
]


@pytest.mark.parametrize("world", WORLDS, ids=lambda world: f"{world.n_machines}-machines")
@pytest.mark.parametrize("min_effect", [0.0, 0.02, 0.05])
@pytest.mark.parametrize("predict_cycles", [1, 3])
def test_the_script_and_the_service_compute_the_same_page(
    world: sim.World, min_effect: float, predict_cycles: int
) -> None:
    page = sim.simulate_page(world, random.Random(world.n_machines))
    page.cells[("01", "c1", 4)] = []  # a cell whose rows were all left out
    options: dict[str, Any] = {"headline_sizes": sim.HEADLINE_SIZES, "min_effect": min_effect}
    ours = stats.page_stats(page.cells, predict_cycles=predict_cycles, **options)
    rows = {key: [script().Measured(*dataclasses.astuple(row)) for row in found] for key, found in page.cells.items()}
    theirs = script().page_stats(rows, predict_cycles=predict_cycles, **options)
    assert ours.cells.keys() == theirs.cells.keys() and ours.headlines.keys() == theirs.headlines.keys()
    seen.update(cell.verdict for cell in ours.cells.values())
    for key in ours.cells:
        for name, value in dataclasses.asdict(ours.cells[key]).items():
            assert same(value, getattr(theirs.cells[key], name)), (key, name)
    for pair in ours.headlines:
        for name, value in dataclasses.asdict(ours.headlines[pair]).items():
            assert same(value, getattr(theirs.headlines[pair], name)), (pair, name)


seen: set[str] = set()


def test_the_pages_compared_reached_every_verdict() -> None:
    """Runs after the comparisons above (pytest keeps file order): they met every word."""
    assert seen >= set(stats.VERDICTS) - {"slower"}, seen


def test_the_script_and_the_service_estimate_a_submission_alike() -> None:
    rng = random.Random(5)
    runs = sim.submission_runs(sim.World(1, position=0.03), rng, 100.0, 0.04, {("01", 4): 0.05}, 3)
    runs = [{**run, "exit_code": 0} for run in runs]
    ours = cycles.submission_estimates(runs, sim.BASELINE)
    theirs = script().paired_rows({"sweep": {"runs": runs}}, sim.BASELINE)
    assert theirs.keys() == ours.keys()
    for key, found in ours.items():
        ratio, _, log_se, df, n_cycles = theirs[key]
        assert (ratio, log_se, df, n_cycles) == (found.ratio, found.log_se, found.df, found.n_cycles), key


def test_the_script_has_the_services_constants_and_words() -> None:
    for name in (
        "VERDICTS",
        "CONFIDENCE",
        "INTERVAL_LABEL",
        "PREDICT_LEVEL",
        "PREDICT_CYCLES",
        "MIN_MACHINES",
        "EFFECT_FLOOR",
        "CLEAR_SHARE",
    ):
        assert getattr(script(), name) == getattr(stats, name), name
    for name in ("PRIOR_DF", "MIN_CYCLE_SD", "EMPIRICAL_FROM"):
        assert getattr(script(), name) == getattr(meta, name), name
    assert script().MEDIAN_VARIANCE_FACTOR == cycles.MEDIAN_VARIANCE_FACTOR
    for n in range(1, 6):
        assert script().information(n) == cycles.information(n)
    for p, df in [(0.9, 2), (0.99875, 7), (0.999, 40)]:
        assert script().t_quantile(p, df) == stats.t_quantile(p, df)
        assert script().chi2_upper_tail(p * 10, df) == distributions.chi2_upper_tail(p * 10, df)
        assert script().normal_quantile(p) == distributions.normal_quantile(p)
