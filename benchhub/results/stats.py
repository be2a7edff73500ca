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

import math
from bisect import bisect_left, bisect_right
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from heapq import merge

CONFIDENCE = 0.95


def median_ranks(n: int) -> tuple[int, int]:
    """1-based ranks of the two middle order statistics (the same one twice for odd n)."""
    if n < 1:
        raise ValueError("median of no values")
    return (n + 1) // 2, n // 2 + 1


def median_of(low: float, high: float) -> float:
    """The median from the order statistics at median_ranks."""
    return float(low) if low == high else (low + high) / 2


def median(values: Sequence[float]) -> float:
    ordered = sorted(values)
    low, high = median_ranks(len(ordered))
    return median_of(ordered[low - 1], ordered[high - 1])


def spread(values: Sequence[float], centre: float | None = None) -> float:
    """(max - min) / median: how far repetitions of the same build disagree (`centre`: their
    median, where the caller has it already)."""
    if centre is None:
        centre = median(values)
    return (max(values) - min(values)) / centre if centre else 0.0


def paired_speedup(variant_tg_tps: float, baseline_tg_tps: float) -> float | None:
    return variant_tg_tps / baseline_tg_tps if baseline_tg_tps > 0 else None


@lru_cache(maxsize=65536)
def median_interval_ranks(n: int, confidence: float = CONFIDENCE) -> tuple[int, int]:
    """1-based ranks (low, high) of the order statistics bounding the median's interval: low is the
    largest k <= n // 2 with 2 P(B <= k-1) <= 1 - confidence (1 where there is none, below n = 6).

    Up to EXACT_UP_TO it is summed with exact integers; above, the binomial tail is summed in floating
    point around a normal approximation of k, which costs O(sqrt n) instead of O(n) big-integer steps
    (a cell's n changes with every arriving submission, so this runs on every refresh), and is
    settled exactly wherever the float lies too close to the bound to decide."""
    if n < 1:
        raise ValueError("an interval needs at least one value")
    alpha = 1 - confidence
    low = _exact_low_rank(n, alpha) if n <= EXACT_UP_TO else _approximate_low_rank(n, alpha)
    return low, n - low + 1


EXACT_UP_TO = 200


def _exact_within(n: int, k: int, alpha: float) -> bool:
    """2 P(B <= k-1) <= alpha, B ~ Binomial(n, 1/2), with exact integers."""
    return 2 * sum(math.comb(n, i) for i in range(k)) / 2**n <= alpha


def _exact_low_rank(n: int, alpha: float) -> int:
    """P(B <= k-1) accumulated term by term with exact integers, C(n, i+1) = C(n, i) (n-i) / (i+1)."""
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
    return low


def _within(n: int, k: int, alpha: float) -> bool:
    """2 P(B <= k-1) <= alpha: the tail summed in floating point from its largest term down (its
    relative error is far below 1e-9), exactly when that close to alpha."""
    i = k - 1
    term = math.exp(math.lgamma(n + 1) - math.lgamma(i + 1) - math.lgamma(n - i + 1) - n * math.log(2))
    tail = 0.0
    while i >= 0 and term > tail * 1e-17:
        tail += term
        term *= i / (n - i + 1)
        i -= 1
    if abs(2 * tail - alpha) <= 1e-9 * alpha:
        return _exact_within(n, k, alpha)
    return 2 * tail <= alpha


def _approximate_low_rank(n: int, alpha: float) -> int:
    k = max(1, min(n // 2, int(n / 2 - 0.98 * math.sqrt(n))))  # z(0.975) / 2 standard deviations below
    while k < n // 2 and _within(n, k + 1, alpha):
        k += 1
    while k > 1 and not _within(n, k, alpha):
        k -= 1
    return k


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


# A cell's statistics are order statistics of three columns. Only the elements at a few ranks are
# needed, so a cell can be kept up to date from those elements alone, stepping each one to its new
# rank when values are added (cells.py), instead of re-reading the cell's whole history.
COLUMNS = ("tg_tps", "baseline_tg_tps", "speedup")

# One element of a column in a total order: its value, then a key unique within the cell breaking
# ties, so that "the element at rank r" is one definite row. Cells use the submission's id (one row
# per submission and cell), which a rebuild of the rows keeps.
Ranked = tuple[float, str]
# Per column, the elements at tracked_ranks(n)[column], in that order.
OrderState = dict[str, list[Ranked]]


def tracked_ranks(n: int) -> dict[str, tuple[int, ...]]:
    """The 1-based ranks each column's statistics need among n values."""
    low, high = median_ranks(n)
    ci_low, ci_high = median_interval_ranks(n)
    return {"tg_tps": (low, high), "baseline_tg_tps": (low, high), "speedup": (ci_low, low, high, ci_high)}


def order_state(columns: Mapping[str, Sequence[Ranked]]) -> OrderState:
    """The tracked elements of a cell, from every element of each column (in any order)."""
    return tracked_and_bands(columns)[0]


def tracked_and_bands(
    columns: Mapping[str, Sequence[Ranked]],
) -> tuple[OrderState, dict[str, tuple[Band, list[Ranked]]]]:
    """The tracked elements of a cell and, per column, a fresh band around them with its elements,
    from every element of each column (in any order; none gives no band)."""
    n = len(columns["speedup"])
    state: OrderState = {}
    bands: dict[str, tuple[Band, list[Ranked]]] = {}
    if n == 0:
        return state, bands
    ranks = tracked_ranks(n)
    for column in COLUMNS:
        ordered = sorted(columns[column])
        state[column] = [ordered[rank - 1] for rank in ranks[column]]
        bands[column] = band_of(ordered, ranks[column])
    return state, bands


# An incremental refresh steps each tracked element through its stored neighbours. It finds them in
# a band of the column's order around the tracked ranks, kept whole in a table of its own
# (models.CellBand), rather than in an index of every stored value: each value added then writes an
# entry there only when it lands inside a band (a few percent of them at thousands of values a
# cell), not one entry per column at a random place in an index of the whole history
# (docs/performance.md, section 2).
BAND_MIN_MARGIN = 8


def band_margin(n: int) -> int:
    """How many stored elements a fresh band holds on either side of its column's tracked ranks.
    A tracked rank wanders through the order by about half a place per value added, a random walk,
    so it leaves a band of margin m after some 4 m^2 additions: growing with sqrt(n), that is more
    than n additions, and re-reading the cell then costs under one row per value added."""
    return BAND_MIN_MARGIN + math.isqrt(n) // 2


@dataclass(frozen=True)
class Band:
    """A stretch of one column's order, its ranks below + 1 to n - above, whose every element is
    stored in the band table; lo and hi are its ends."""

    below: int
    above: int
    lo: Ranked
    hi: Ranked


def band_of(ordered: Sequence[Ranked], ranks: Sequence[int]) -> tuple[Band, list[Ranked]]:
    """A fresh band of the sorted column around the 1-based `ranks`, and its elements."""
    n = len(ordered)
    first, last = band_range(n, ranks)
    return Band(first - 1, n - last, ordered[first - 1], ordered[last - 1]), list(ordered[first - 1 : last])


def band_range(n: int, ranks: Sequence[int]) -> tuple[int, int]:
    """The 1-based ranks of a fresh band's ends among n elements, around the tracked `ranks`."""
    margin = band_margin(n)
    return max(1, min(ranks) - margin), min(n, max(ranks) + margin)


def band_from(n: int, first: int, stretch: Sequence[Ranked], ranks: Sequence[int]) -> tuple[Band, list[Ranked]]:
    """A fresh band from its elements alone: `stretch`, the sorted elements at ranks first,
    first + 1, ... of n; and the elements at the tracked `ranks`, which it must hold."""
    last = first + len(stretch) - 1
    if not stretch or min(ranks) < first or max(ranks) > last or last > n:
        raise StaleState(f"a stretch of ranks {first}..{last} of {n} does not hold the ranks {list(ranks)}")
    return Band(first - 1, n - last, stretch[0], stretch[-1]), [stretch[rank - first] for rank in ranks]


def band_with(band: Band, added: Sequence[Ranked]) -> tuple[Band, list[Ranked]]:
    """The band once the sorted `added` join its column, and those of them it takes: the ones
    between its ends, and beyond an end where nothing is stored beyond it."""
    lower = bisect_left(added, band.lo) if band.below else 0
    upper = bisect_right(added, band.hi) if band.above else len(added)
    taken = list(added[lower:upper])
    lo = band.lo if band.below or not taken else min(band.lo, taken[0])
    hi = band.hi if band.above or not taken else max(band.hi, taken[-1])
    return Band(band.below + lower, band.above + len(added) - upper, lo, hi), taken


def band_holds(band: Band, n: int, ranks: Sequence[int]) -> bool:
    """Whether the band of a column of n elements still serves its tracked `ranks`: every one inside
    it, and the band not grown past twice what a fresh one would hold (values added between its
    ends widen it; past that it is cut back to a fresh one by re-reading the cell)."""
    fresh = min(n, max(ranks) - min(ranks) + 1 + 2 * band_margin(n))
    return band.below < min(ranks) and max(ranks) <= n - band.above and n - band.below - band.above <= 2 * fresh


def cell_stats(n: int, state: OrderState, n_contributors: int) -> CellStats | None:
    """Medians across submissions and the interval of the median speedup; None for no samples."""
    if n == 0:
        return None
    ci_low, low, high, ci_high = (value for value, _ in state["speedup"])
    return CellStats(
        tg_tps=median_of(state["tg_tps"][0][0], state["tg_tps"][1][0]),
        baseline_tg_tps=median_of(state["baseline_tg_tps"][0][0], state["baseline_tg_tps"][1][0]),
        speedup=median_of(low, high),
        ci_low=float(ci_low),
        ci_high=float(ci_high),
        n_submissions=n,
        n_contributors=n_contributors,
    )


def aggregate(samples: CellSamples) -> CellStats | None:
    """Medians across submissions and the interval of the median speedup; None for no samples."""
    if not samples.speedup:
        return None
    columns = {
        column: [(value, f"{index:09d}") for index, value in enumerate(getattr(samples, column))] for column in COLUMNS
    }
    return cell_stats(len(samples.speedup), order_state(columns), len(set(samples.contributors)))


class StaleState(Exception):
    """The stored elements and the stored order state disagree (rows rewritten under it): the cell
    must be recomputed from all of its values."""


@dataclass(frozen=True)
class Move:
    """How one tracked element reaches its rank after values are added: `steps` positions from
    `start` (an element already stored) through the merged order, forward when positive. Reaching
    it needs at most |steps| stored neighbours of `start` in that direction (the added values in
    between count as steps too)."""

    start: Ranked
    steps: int


def moves(n: int, state: list[Ranked], column: str, added: Sequence[Ranked]) -> list[Move | Ranked]:
    """For each tracked element of `column`, after the sorted values `added` join the n stored
    ones: the Move from the element tracked so far (steps 0 where it keeps its place), or, in a
    cell that had no values, the element itself (one of the added)."""
    new_ranks = tracked_ranks(n + len(added))[column]
    if n == 0:
        return [added[rank - 1] for rank in new_ranks]
    return [
        Move(start, new_rank - (old_rank + bisect_left(added, start)))
        for start, old_rank, new_rank in zip(state, tracked_ranks(n)[column], new_ranks, strict=True)
    ]


def resolve(move: Move, neighbours: Sequence[Ranked], added: Sequence[Ranked]) -> Ranked:
    """The element `move` reaches, given the stored neighbours of its start in its direction
    (nearest first; at most |steps| of them, fewer only where the column ends) and the sorted added
    values."""
    if move.steps == 0:
        return move.start
    if move.steps > 0:
        between = merge(neighbours, added[bisect_left(added, move.start) :])
    else:
        between = merge(neighbours, reversed(added[: bisect_left(added, move.start)]), reverse=True)
    for position, element in enumerate(between, start=1):
        if position == abs(move.steps):
            return element
    raise StaleState(f"fewer than {abs(move.steps)} elements beside {move.start}")
