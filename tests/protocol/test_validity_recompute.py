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

import pytest
from benchhub_protocol import stats

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
    sim.World(2, effect=sim.constant(0.05)),
    sim.World(3, effect=sim.constant(0.08), machine_sd=0.0),
    sim.World(8, effect=sim.varying(0.10), skewed=True, miss=0.2),
    sim.World(25, effect=sim.constant(0.005)),
    sim.World(12, effect=sim.constant(-0.06), round_sd=0.05),
]


@pytest.mark.parametrize("world", WORLDS, ids=lambda world: f"{world.n_machines}-machines")
@pytest.mark.parametrize("min_effect", [0.0, 0.02, 0.05])
def test_the_script_and_the_service_compute_the_same_page(world: sim.World, min_effect: float) -> None:
    page = sim.simulate_page(world, random.Random(world.n_machines))
    page.cells[("01", "c1", 4)] = []  # a cell whose rows were all left out
    ours = stats.page_stats(page.cells, headline_sizes=sim.HEADLINE_SIZES, min_effect=min_effect)
    rows = {key: [script().Measured(*dataclasses.astuple(row)) for row in found] for key, found in page.cells.items()}
    theirs = script().page_stats(rows, headline_sizes=sim.HEADLINE_SIZES, min_effect=min_effect)
    assert ours.cells.keys() == theirs.cells.keys() and ours.headlines.keys() == theirs.headlines.keys()
    for key in ours.cells:
        for name, value in dataclasses.asdict(ours.cells[key]).items():
            assert same(value, getattr(theirs.cells[key], name)), (key, name)
    for pair in ours.headlines:
        for name, value in dataclasses.asdict(ours.headlines[pair]).items():
            assert same(value, getattr(theirs.headlines[pair], name)), (pair, name)


def test_the_script_has_the_services_constants_and_words() -> None:
    for name in ("VERDICTS", "CONFIDENCE", "INTERVAL_LABEL", "PREDICT_LEVEL", "MIN_MACHINES", "EFFECT_FLOOR"):
        assert getattr(script(), name) == getattr(stats, name), name
    for p, df in [(0.9, 2), (0.99875, 7), (0.999, 40)]:
        assert script().t_quantile(p, df) == stats.t_quantile(p, df)
