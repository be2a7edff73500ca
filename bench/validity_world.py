"""Simulated chip pages with a known truth, for `python -m bench validity` (cells v4).

The noise follows the real A/A runs in shared/reference/aa-h200-0c1e570 (llama-batched-bench at
-ntg 64 on an H200): most of a run's deviation is an offset of the whole process, shared by every
batch size it runs (3.3% per process against 1.8% per batch size there, so per-round ratios at
different batch sizes correlate about 0.8). One round runs the baseline and both variants, each as
its own process, in the order of a rotation cycle drawn afresh for each cycle (every variant once in
every position, as the agent runs them); a position may carry a slowdown shared by the chip's
machines. A submission runs a drawn number of whole cycles, and a machine 1-3 submissions. Machines
differ in their true ratio (normal, skewed, split into two populations, or a few outliers), mostly by
an amount shared by all batch sizes. Every number then goes through the shared package's own code:
cycles.submission_estimates per submission, stats.page_stats per page.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from benchhub_protocol import cycles, stats
from benchhub_protocol.words import DEFAULT_MIN_EFFECT

BATCH_SIZES = (1, 2, 3, 4, 5, 8, 9, 12, 16)  # the campaign's sweep
HEADLINE_SIZES = (2, 3, 4, 5, 8)  # its batch sizes 2-8
BASELINE = "upstream"
VARIANTS = ("01", "01+02")
MIN_EFFECT = DEFAULT_MIN_EFFECT
SHARED = 0.8  # share of a process's noise that is one offset for all its batch sizes (A/A data: 0.78)
MACHINE_SHARED = 0.75  # share of a machine's effect variance common to all batch sizes
# Whole cycles a submission runs: the agent stops once its verdicts settle, so most runs are short.
CYCLES = (1, 1, 2, 2, 2, 3, 3, 3, 4, 4, 5, 6, 8, 10)


@dataclass(frozen=True)
class Split:
    """Two populations of machines: `share` of them at true ratio 1 + up, the rest at 1 + down."""

    share: float
    up: float
    down: float


@dataclass(frozen=True)
class World:
    """What is true on one simulated page."""

    n_machines: int
    effect: Callable[[str, int], float] = lambda variant, size: 0.0  # true log ratio per cell, typical machine
    round_sd: float = 0.03  # sd of one round's log ratio (variant process against baseline process)
    machine_sd: float = 0.01  # sd of the machines' true log ratios around the typical machine
    skewed: bool = False
    heavy: bool = False  # process offsets from Student t with 3 df (same sd): warm-up and stray load
    cycles: tuple[int, ...] = CYCLES  # drawn per submission
    noise_spread: float = 0.0  # machines' round_sd differ by a factor exp(N(0, noise_spread))
    submissions: tuple[int, int] = (1, 3)
    miss: float = 0.0  # chance that a machine never measured a given batch size
    split: Split | None = None
    outliers: float = 0.0  # share of machines whose true ratio is off by ±OUTLIER
    position: float = 0.0  # slowdown of whoever runs in the middle of a round, every machine alike
    extra_machines: int = 0  # more machines, held out of the page (for the prediction range)
    predict_cycles: int = stats.PREDICT_CYCLES  # the held-out machines' run length


OUTLIER = 0.10


@dataclass
class Page:
    cells: dict[tuple[str, str, int], list[stats.Row]] = field(default_factory=dict)
    extra: list[dict[tuple[str, str, int], float]] = field(default_factory=list)  # held-out machines' values
    truth: dict[tuple[str, str, int], float] = field(default_factory=dict)  # the typical machine's
    headline_truth: dict[tuple[str, str], float] = field(default_factory=dict)
    sides: set[bool] = field(default_factory=set)  # of a split world: which populations the page drew


def machine_deviation(world: World, rng: random.Random) -> float:
    """One machine's shared deviation of its true log ratio from the typical machine's."""
    if world.split is not None:  # a machine's population is its own for every variant
        return 0.0
    scale = world.machine_sd * math.sqrt(MACHINE_SHARED)
    value = scale * (rng.expovariate(1.0) - 1.0) if world.skewed else rng.gauss(0.0, scale)
    if rng.random() < world.outliers:
        value += math.log1p(OUTLIER) * rng.choice((-1.0, 1.0))
    return value


def heavy_tailed(rng: random.Random, sd: float) -> float:
    """Student t with 3 degrees of freedom scaled to standard deviation sd (its variance is 3)."""
    chi2 = sum(rng.gauss(0.0, 1.0) ** 2 for _ in range(3))
    return sd * rng.gauss(0.0, 1.0) / math.sqrt(chi2 / 3) / math.sqrt(3)


def cycle_orders(rng: random.Random, n_cycles: int) -> list[list[str]]:
    """Each cycle's rounds: a random order, then its rotations (every variant once in every position)."""
    names = [BASELINE, *VARIANTS]
    rounds = []
    for _ in range(n_cycles):
        first = rng.sample(names, len(names))
        rounds += [first[shift:] + first[:shift] for shift in range(len(names))]
    return rounds


def submission_runs(
    world: World, rng: random.Random, speed: float, round_sd: float, true_log: dict[tuple[str, int], float], count: int
) -> list[dict[str, Any]]:
    """One submission's runs as the payload carries them: whole cycles of rounds."""
    process_sd = round_sd * math.sqrt(SHARED / 2)
    size_sd = round_sd * math.sqrt((1 - SHARED) / 2)
    runs: list[dict[str, Any]] = []
    for rep, order in enumerate(cycle_orders(rng, count), start=1):
        for position, name in enumerate(order):
            offset = heavy_tailed(rng, process_sd) if world.heavy else rng.gauss(0.0, process_sd)
            if position == 1:
                offset += math.log1p(-world.position)
            rows = []
            for size in BATCH_SIZES:
                log_rate = offset + rng.gauss(0.0, size_sd) + true_log.get((name, size), 0.0)
                rows.append({"batch_size": size, "tg_tps": speed * size**0.8 * math.exp(log_rate)})
            runs.append({"variant": name, "rep": rep, "seq": len(runs) + 1, "rows": rows})
    return runs


def machine_estimates(
    world: World, rng: random.Random, page: Page, held_out: bool
) -> dict[tuple[str, int], list[tuple[cycles.SubmissionEstimate, float]]]:
    """One machine's submissions' estimates per cell, with the baseline's rate, through the shared
    package's cycles.submission_estimates; a held-out machine runs one submission of the stated length."""
    shared = {variant: machine_deviation(world, rng) for variant in VARIANTS}
    if world.split is not None:
        up = rng.random() < world.split.share
        page.sides.add(up)
        shared = dict.fromkeys(VARIANTS, math.log1p(world.split.up if up else world.split.down))
    per_size_sd = world.machine_sd * math.sqrt(1 - MACHINE_SHARED)
    true_log = {
        (variant, size): world.effect(variant, size) + shared[variant] + rng.gauss(0.0, per_size_sd)
        for variant in VARIANTS
        for size in BATCH_SIZES
    }
    missing = {size for size in BATCH_SIZES if rng.random() < world.miss}
    speed = 100.0 * math.exp(rng.gauss(0.0, 0.05))
    round_sd = world.round_sd * math.exp(rng.gauss(0.0, world.noise_spread))
    found: dict[tuple[str, int], list[tuple[cycles.SubmissionEstimate, float]]] = {}
    count = 1 if held_out else rng.randint(*world.submissions)
    for _ in range(count):
        n_cycles = world.predict_cycles if held_out else rng.choice(world.cycles)
        runs = submission_runs(world, rng, speed, round_sd, true_log, n_cycles)
        estimates = cycles.submission_estimates(runs, BASELINE)
        for variant in VARIANTS:
            for size in BATCH_SIZES:
                if size not in missing:
                    found.setdefault((variant, size), []).append((estimates[(variant, size)], speed * size**0.8))
    return found


def simulate_page(world: World, rng: random.Random) -> Page:
    page = Page()
    for variant in VARIANTS:
        for size in BATCH_SIZES:
            page.cells[(variant, "c0", size)] = []
            page.truth[(variant, "c0", size)] = math.exp(world.effect(variant, size))
        page.headline_truth[(variant, "c0")] = math.exp(
            sum(world.effect(variant, size) for size in HEADLINE_SIZES) / len(HEADLINE_SIZES)
        )
    for index in range(world.n_machines + world.extra_machines):
        machine = f"key{index}"
        held_out = index >= world.n_machines
        if held_out:
            page.extra.append({})
            sides = set(page.sides)
        for (variant, size), found in machine_estimates(world, rng, page, held_out).items():
            key = (variant, "c0", size)
            if held_out:
                page.extra[-1][key] = found[0][0].ratio
                continue
            for estimate, baseline in found:
                assert estimate.log_se is not None
                numbers = (estimate.ratio, baseline, estimate.log_se, estimate.df, estimate.n_cycles)
                page.cells[key].append(stats.Row(machine, machine, *numbers))
        if held_out:
            page.sides = sides  # the held-out machines' populations are not the page's
    return page


def judge(page: Page, predict_cycles: int = stats.PREDICT_CYCLES) -> stats.PageStats:
    return stats.page_stats(
        page.cells, headline_sizes=HEADLINE_SIZES, min_effect=MIN_EFFECT, predict_cycles=predict_cycles
    )


def constant(effect: float) -> Callable[[str, int], float]:
    """The same true ratio 1 + effect in every cell."""
    value = math.log1p(effect)
    return lambda variant, size: value


def varying(peak: float) -> Callable[[str, int], float]:
    """Effects that differ by batch size and variant (up to 1 + peak at BS4 for 01+02), as the
    patches' do, so that a headline over the wrong sizes would be off."""

    def effect(variant: str, size: int) -> float:
        scale = 1.0 if variant == "01+02" else 0.6
        return math.log1p(peak * scale * math.exp(-((math.log2(size) - 2.0) ** 2) / 2.0))

    return effect


def rate(outcomes: Sequence[float]) -> tuple[float, float]:
    """Mean of per-page outcomes (0/1, or a share of the page's cells) and its Monte-Carlo error:
    the standard error over pages, which are independent (cells of one page are not)."""
    n = len(outcomes)
    mean = math.fsum(outcomes) / n
    if n < 2:
        return mean, math.nan
    variance = math.fsum((value - mean) ** 2 for value in outcomes) / (n - 1)
    return mean, math.sqrt(variance / n)
