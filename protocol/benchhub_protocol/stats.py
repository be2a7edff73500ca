"""Pure statistics for the leaderboard (no ORM, no Django): PROTOCOL.md section 5.1.

Inside one submission, rounds pair a variant with its baseline: the submission's speedup at a
batch size is the median over rounds of (variant / baseline in the same round). Across
submissions the unit of replication is the machine: each machine's value is the median of its
submissions', and a cell reports medians over machines with an interval that says what it is: a
distribution-free 95% interval of the median from order statistics once six machines agree to
give one, the min-max range below that, nothing for one machine.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache

CONFIDENCE = 0.95
# Fewer machines than this cannot give a 95% order-statistic interval of the median (2^(1-n) > 5%).
MIN_MACHINES_FOR_INTERVAL = 6


def median(values: Sequence[float]) -> float:
    if not values:
        raise ValueError("median of no values")
    ordered = sorted(values)
    middle = len(ordered) // 2
    if len(ordered) % 2:
        return float(ordered[middle])
    return (ordered[middle - 1] + ordered[middle]) / 2


@lru_cache(maxsize=4096)
def median_interval_ranks(n: int, confidence: float = CONFIDENCE) -> tuple[int, int] | None:
    """1-based ranks (k, n - k + 1) of the order statistics bounding a distribution-free interval
    of the median: k is the largest k <= n // 2 with 2 P(B <= k - 1) <= 1 - confidence,
    B ~ Binomial(n, 1/2), summed with exact integers. None where no k qualifies (n < 6 at 95%)."""
    alpha = 1 - Fraction(str(confidence))
    best = None
    cumulative = 0
    for k in range(1, n // 2 + 1):
        cumulative += math.comb(n, k - 1)
        if 2 * cumulative * alpha.denominator <= alpha.numerator * 2**n:
            best = k
        else:
            break
    return None if best is None else (best, n - best + 1)


@dataclass(frozen=True)
class PairedNumbers:
    """One submission's numbers for one variant at one batch size, over the rounds in which both
    the variant and the baseline ran."""

    n_rounds: int
    tg_tps: float
    baseline_tg_tps: float
    speedup: float


def paired(variant_by_round: dict[int, float], baseline_by_round: dict[int, float]) -> PairedNumbers | None:
    """Round-paired numbers; None without a round in which both ran with a positive, finite rate."""
    rounds = [
        rep
        for rep in sorted(variant_by_round.keys() & baseline_by_round.keys())
        if _usable(variant_by_round[rep]) and _usable(baseline_by_round[rep])
    ]
    if not rounds:
        return None
    ratios = [variant_by_round[rep] / baseline_by_round[rep] for rep in rounds]
    return PairedNumbers(
        n_rounds=len(rounds),
        tg_tps=median([variant_by_round[rep] for rep in rounds]),
        baseline_tg_tps=median([baseline_by_round[rep] for rep in rounds]),
        speedup=median(ratios),
    )


def _usable(value: float) -> bool:
    return math.isfinite(value) and value > 0


@dataclass(frozen=True)
class Row:
    """What a cell reads of one submission: whose machine it ran on and its paired numbers."""

    machine: Hashable
    contributor: Hashable
    speedup: float
    baseline_tg_tps: float


@dataclass(frozen=True)
class CellStats:
    baseline_tg_tps: float | None
    tg_tps: float | None
    speedup: float | None
    interval: str | None  # "95%", "range" or None
    ci_low: float | None
    ci_high: float | None
    verdict: str
    n_machines: int
    n_submissions: int
    n_contributors: int
    predict_low: float | None = None
    predict_high: float | None = None
    predict_level: float | None = None


def cell_stats(rows: Iterable[Row]) -> CellStats:
    """Medians over machines of each machine's median, and the interval of the median speedup."""
    speedups: dict[Hashable, list[float]] = defaultdict(list)
    baselines: dict[Hashable, list[float]] = defaultdict(list)
    contributors = set()
    n_submissions = 0
    for row in rows:
        if not (_usable(row.speedup) and _usable(row.baseline_tg_tps)):
            continue  # never reached through ingest's bounds; a stored oddity must not poison the cell
        speedups[row.machine].append(row.speedup)
        baselines[row.machine].append(row.baseline_tg_tps)
        contributors.add(row.contributor)
        n_submissions += 1
    n = len(speedups)
    if n == 0:
        return CellStats(None, None, None, None, None, None, "too few machines", 0, 0, 0)
    machine_speedups = sorted(median(values) for values in speedups.values())
    speedup = median(machine_speedups)
    baseline = median([median(values) for values in baselines.values()])
    interval, low, high = _interval(machine_speedups)
    return CellStats(
        baseline_tg_tps=baseline,
        tg_tps=baseline * speedup,
        speedup=speedup,
        interval=interval,
        ci_low=low,
        ci_high=high,
        verdict=verdict(interval, low, high),
        n_machines=n,
        n_submissions=n_submissions,
        n_contributors=len(contributors),
    )


def _interval(ordered: Sequence[float]) -> tuple[str | None, float | None, float | None]:
    n = len(ordered)
    if n >= MIN_MACHINES_FOR_INTERVAL:
        ranks = median_interval_ranks(n)
        if ranks is not None:
            return "95%", ordered[ranks[0] - 1], ordered[ranks[1] - 1]
    if n >= 2:
        return "range", ordered[0], ordered[-1]
    return None, None, None


def verdict(interval: str | None, low: float | None, high: float | None) -> str:
    if interval != "95%" or low is None or high is None:
        return "too few machines"
    if low > 1:
        return "faster"
    if high < 1:
        return "slower"
    return "no clear change"


@dataclass(frozen=True)
class HeadlineStats:
    speedup: float | None
    interval: str | None
    ci_low: float | None
    ci_high: float | None
    verdict: str
    n_machines: int
    predict_low: float | None = None
    predict_high: float | None = None
    predict_level: float | None = None


@dataclass(frozen=True)
class PageStats:
    cells: dict[tuple[str, str, int], CellStats]
    headlines: dict[tuple[str, str], HeadlineStats]


def page_stats(
    cells: Mapping[tuple[str, str, int], Iterable[Row]], *, headline_sizes: Sequence[int], min_effect: float
) -> PageStats:
    """Every cell of one page and each (variant, commit)'s headline.
    INTERIM: the v2 rules per cell; the page-wise v3 method replaces this."""
    found = {}
    by_machine: dict[tuple[str, str], dict[Hashable, dict[int, list[float]]]] = defaultdict(lambda: defaultdict(dict))
    for (variant, commit, batch_size), rows in cells.items():
        rows = list(rows)
        found[(variant, commit, batch_size)] = cell_stats(rows)
        for row in rows:
            by_machine[(variant, commit)][row.machine].setdefault(batch_size, []).append(row.speedup)
    headlines = {key: headline_stats(machines.values(), headline_sizes) for key, machines in by_machine.items()}
    return PageStats(found, headlines)


def headline_stats(machines: Iterable[dict[int, list[float]]], batch_sizes: Sequence[int]) -> HeadlineStats:
    """Per machine (its speedups by batch size), the geometric mean over `batch_sizes` of its median
    at each; machines missing one of them are left out. Then the median over machines, with the
    cell's interval and verdict rules."""
    values = []
    for by_size in machines:
        medians = [median(by_size[size]) for size in batch_sizes if by_size.get(size)]
        if batch_sizes and len(medians) == len(batch_sizes) and all(_usable(value) for value in medians):
            values.append(math.exp(sum(math.log(value) for value in medians) / len(medians)))
    if not values:
        return HeadlineStats(None, None, None, None, "too few machines", 0)
    ordered = sorted(values)
    interval, low, high = _interval(ordered)
    return HeadlineStats(median(ordered), interval, low, high, verdict(interval, low, high), len(ordered))
