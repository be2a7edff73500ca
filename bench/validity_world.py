"""Simulated chip pages with a known truth, for `python -m bench validity`.

The noise follows the real A/A runs in shared/reference/aa-h200-0c1e570 (llama-batched-bench at
-ntg 64 on an H200): most of a run's deviation is an offset of the whole process, shared by every
batch size it runs (3.3% per process against 1.8% per batch size there, so per-round ratios at
different batch sizes correlate about 0.8). One round runs the baseline and every variant, each
as its own process; a submission has 2-10 rounds and a machine 1-3 submissions. Machines differ in
their true ratio (normal, or skewed: a centred exponential, skewness 2), mostly by an amount shared
by all batch sizes. Every number then goes through the server's own code: stats.paired per
submission, stats.page_stats per page.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from benchhub_protocol import stats

BATCH_SIZES = (1, 2, 3, 4, 5, 8, 9, 12, 16)  # the campaign's sweep
HEADLINE_SIZES = (2, 3, 4, 5, 8)  # its batch sizes 2-8
VARIANTS = ("01", "01+02")
MIN_EFFECT = 0.02
SHARED = 0.8  # share of a process's noise that is one offset for all its batch sizes (A/A data: 0.78)
MACHINE_SHARED = 0.75  # share of a machine's effect variance common to all batch sizes


@dataclass(frozen=True)
class World:
    """What is true on one simulated page."""

    n_machines: int
    effect: Callable[[str, int], float] = lambda variant, size: 0.0  # true log ratio per cell
    round_sd: float = 0.03  # sd of one round's log ratio (variant process against baseline process)
    machine_sd: float = 0.01  # sd of the machines' true log ratios around the typical machine
    skewed: bool = False
    heavy: bool = False  # process offsets from Student t with 3 df (same sd): warm-up and stray load
    rounds: tuple[int, int] = (2, 10)
    submissions: tuple[int, int] = (1, 3)
    miss: float = 0.0  # chance that a machine never measured a given batch size
    extra_machines: int = 0  # more machines, held out of the page (for the prediction range)


@dataclass
class Page:
    cells: dict[tuple[str, str, int], list[stats.Row]] = field(default_factory=dict)
    extra: list[dict[tuple[str, str, int], float]] = field(default_factory=list)  # held-out machines' values
    truth: dict[tuple[str, str, int], float] = field(default_factory=dict)
    headline_truth: dict[tuple[str, str], float] = field(default_factory=dict)


def machine_deviation(world: World, rng: random.Random) -> float:
    """One machine's shared deviation of its true log ratio: mean 0, sd machine_sd * sqrt(MACHINE_SHARED)."""
    scale = world.machine_sd * math.sqrt(MACHINE_SHARED)
    if world.skewed:
        return scale * (rng.expovariate(1.0) - 1.0)
    return rng.gauss(0.0, scale)


def heavy_tailed(rng: random.Random, sd: float) -> float:
    """Student t with 3 degrees of freedom scaled to standard deviation sd (its variance is 3)."""
    chi2 = sum(rng.gauss(0.0, 1.0) ** 2 for _ in range(3))
    return sd * rng.gauss(0.0, 1.0) / math.sqrt(chi2 / 3) / math.sqrt(3)


def submission_rounds(world: World, rng: random.Random, speed: float) -> dict[str, dict[int, dict[int, float]]]:
    """tg_tps by variant (baseline "upstream" included), batch size and round, for one submission."""
    process_sd = world.round_sd * math.sqrt(SHARED / 2)
    size_sd = world.round_sd * math.sqrt((1 - SHARED) / 2)
    out: dict[str, dict[int, dict[int, float]]] = {
        name: {size: {} for size in BATCH_SIZES} for name in ("upstream", *VARIANTS)
    }
    for rep in range(1, rng.randint(*world.rounds) + 1):
        for name in out:
            offset = heavy_tailed(rng, process_sd) if world.heavy else rng.gauss(0.0, process_sd)
            for size in BATCH_SIZES:
                out[name][size][rep] = speed * size**0.8 * math.exp(offset + rng.gauss(0.0, size_sd))
    return out


def machine_rows(world: World, rng: random.Random, machine: str) -> dict[tuple[str, int], list[stats.PairedNumbers]]:
    """One machine's submissions, paired as ingest pairs them, with its true effects applied."""
    shared = {variant: machine_deviation(world, rng) for variant in VARIANTS}
    per_size_sd = world.machine_sd * math.sqrt(1 - MACHINE_SHARED)
    true_log = {
        (variant, size): world.effect(variant, size) + shared[variant] + rng.gauss(0.0, per_size_sd)
        for variant in VARIANTS
        for size in BATCH_SIZES
    }
    missing = {size for size in BATCH_SIZES if rng.random() < world.miss}
    speed = 100.0 * math.exp(rng.gauss(0.0, 0.05))
    found: dict[tuple[str, int], list[stats.PairedNumbers]] = {}
    for _ in range(rng.randint(*world.submissions)):
        runs = submission_rounds(world, rng, speed)
        for (variant, size), log_ratio in true_log.items():
            if size in missing:
                continue
            scaled = {rep: value * math.exp(log_ratio) for rep, value in runs[variant][size].items()}
            numbers = stats.paired(scaled, runs["upstream"][size])
            assert numbers is not None
            found.setdefault((variant, size), []).append(numbers)
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
        for (variant, size), numbers in machine_rows(world, rng, machine).items():
            key = (variant, "c0", size)
            if held_out:
                page.extra[-1][key] = stats.median([n.speedup for n in numbers])
            else:
                page.cells[key] += [stats.Row(machine, machine, n.speedup, n.baseline_tg_tps) for n in numbers]
    return page


def judge(page: Page) -> stats.PageStats:
    return stats.page_stats(page.cells, headline_sizes=HEADLINE_SIZES, min_effect=MIN_EFFECT)


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
