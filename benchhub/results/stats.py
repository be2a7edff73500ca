"""Pure statistics for the leaderboard (no ORM, no Django).

Method (PROTOCOL.md section 5): inside one submission a variant's throughput at a batch size is
the median over its reps, and its speedup is that median over the baseline's median at the same
batch size (a paired ratio: both ran on the same machine, interleaved). Across submissions the
cell reports medians, and a distribution-free 95% interval of the median speedup from order
statistics: with the n speedups sorted, [x_(k), x_(n-k+1)] covers the population median with
probability 1 - 2 P(B <= k-1), B ~ Binomial(n, 1/2); k is the largest index keeping that at or
above 95%. Below n = 6 no pair of order statistics reaches 95%, so the interval is the full range
[min, max] (its coverage 1 - 2^(1-n) is lower and said so in the API docs); n = 1 gives [x, x].
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache

CONFIDENCE = 0.95


def median(values: Sequence[float]) -> float:
    if not values:
        raise ValueError("median of no values")
    ordered = sorted(values)
    middle = len(ordered) // 2
    if len(ordered) % 2:
        return float(ordered[middle])
    return (ordered[middle - 1] + ordered[middle]) / 2


def spread(values: Sequence[float]) -> float:
    """(max - min) / median: how far repetitions of the same build disagree."""
    centre = median(values)
    return (max(values) - min(values)) / centre if centre else 0.0


def paired_speedup(variant_tg_tps: float, baseline_tg_tps: float) -> float | None:
    return variant_tg_tps / baseline_tg_tps if baseline_tg_tps > 0 else None


@cache
def median_interval_ranks(n: int, confidence: float = CONFIDENCE) -> tuple[int, int]:
    """1-based ranks (low, high) of the order statistics bounding the median's interval.

    P(B <= k-1) is accumulated term by term with exact integers, C(n, i+1) = C(n, i) (n-i) / (i+1),
    so a cell of n submissions costs O(n) once per n (cached), not O(n^2) big binomials per refresh."""
    if n < 1:
        raise ValueError("an interval needs at least one value")
    alpha = 1 - confidence
    total = 2**n
    low = 1
    term = 1  # C(n, k-1)
    cumulative = 1  # sum of C(n, i) for i <= k-1
    for k in range(1, n // 2 + 1):
        if 2 * cumulative / total <= alpha:
            low = k
        else:
            break
        term = term * (n - k + 1) // k
        cumulative += term
    return low, n - low + 1


def median_interval(values: Sequence[float], confidence: float = CONFIDENCE) -> tuple[float, float]:
    ordered = sorted(values)
    low, high = median_interval_ranks(len(ordered), confidence)
    return float(ordered[low - 1]), float(ordered[high - 1])


@dataclass(frozen=True)
class CellStats:
    tg_tps: float
    baseline_tg_tps: float
    speedup: float
    ci_low: float
    ci_high: float
    n_submissions: int
    n_contributors: int


@dataclass(frozen=True)
class CellSamples:
    """The included submissions' numbers for one cell, column by column: position i of every
    column is submission i (a paired sample: its throughput, its baseline's, their ratio)."""

    tg_tps: Sequence[float]
    baseline_tg_tps: Sequence[float]
    speedup: Sequence[float]
    contributors: Sequence[int]


def aggregate(samples: CellSamples) -> CellStats | None:
    """Medians across submissions and the interval of the median speedup; None for no samples."""
    if not samples.speedup:
        return None
    ci_low, ci_high = median_interval(samples.speedup)
    return CellStats(
        tg_tps=median(samples.tg_tps),
        baseline_tg_tps=median(samples.baseline_tg_tps),
        speedup=median(samples.speedup),
        ci_low=ci_low,
        ci_high=ci_high,
        n_submissions=len(samples.speedup),
        n_contributors=len(set(samples.contributors)),
    )
