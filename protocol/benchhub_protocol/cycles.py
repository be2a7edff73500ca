"""One submission, one estimate, over whole rotation cycles (docs/protocol.md section 7, cells v4).

A round is the runs that share a `rep`. A cycle is a run of consecutive rounds (k of them for k
variants) in which every variant took every position once: over a cycle a slowdown tied to a position
hits every variant equally. A cycle's ratio is the geometric mean of its rounds' ratios; the
submission's estimate in a cell is the median of its cycles' ratios, with a standard error from the
cycles. Rounds of an incomplete last cycle, and rounds that do not form a cycle, do not count.

The agent prints this estimate and the service stores it: one function, so both show the same number.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

# The median of m cycle ratios is noisier than their mean: for normal noise its variance is about
# pi/2 times the mean's at large m (1.35 at m = 3); the mean and the median coincide at m <= 2.
MEDIAN_VARIANCE_FACTOR = math.pi / 2


@dataclass(frozen=True)
class SubmissionEstimate:
    """A submission's ratio in one cell, with its precision on the log scale."""

    ratio: float  # the median of the cycles' ratios
    log_se: float | None  # standard error of log(ratio); None where one cycle of two rounds has no spread
    df: int  # degrees of freedom of log_se
    n_cycles: int
    cycle_ratios: tuple[float, ...]


def run_positions(runs: Sequence[dict[str, Any]]) -> dict[tuple[str, int], int]:
    """Each run's position in its round (0 = first), from the order the runs ran in (`seq`)."""
    by_round: dict[int, list[dict[str, Any]]] = {}
    for run in runs:
        by_round.setdefault(run["rep"], []).append(run)
    return {
        (run["variant"], rep): index
        for rep, members in by_round.items()
        for index, run in enumerate(sorted(members, key=lambda member: member["seq"]))
    }


def balanced_spread(runs: Sequence[dict[str, Any]], batch_size: int) -> tuple[float, int, int] | None:
    """(residual SD, its degrees of freedom, rounds) of log speed ~ round + variant + position, when the
    rounds with a row from every variant form a balanced design (each variant equally often in each
    position), where the effects are plain marginal means; None otherwise (and for one cycle of two
    variants, which leaves no degree of freedom)."""
    log_speeds = _log_speeds(runs, only=batch_size).get(batch_size, {})
    names = sorted({run["variant"] for run in runs})
    return _fit(log_speeds, run_positions(runs), names, {run["rep"] for run in runs})


def _log_speeds(runs: Sequence[dict[str, Any]], only: int | None = None) -> dict[int, dict[tuple[str, int], float]]:
    """log tg_tps by batch size (`only` that one), then (variant, rep), for the rows with a positive rate."""
    found: dict[int, dict[tuple[str, int], float]] = {}
    for run in runs:
        for row in run["rows"]:
            if row["tg_tps"] > 0 and (only is None or row["batch_size"] == only):
                found.setdefault(row["batch_size"], {})[(run["variant"], run["rep"])] = math.log(row["tg_tps"])
    return found


def _mean(values: Sequence[float]) -> float:
    return math.fsum(values) / len(values)  # what statistics.fmean computes, without its counting


def _fit(
    log_speeds: dict[tuple[str, int], float],
    positions: dict[tuple[str, int], int],
    names: Sequence[str],
    rounds: Iterable[int],
) -> tuple[float, int, int] | None:
    """balanced_spread over the given rounds, from one batch size's log speeds and the runs' positions."""
    reps = sorted(rep for rep in rounds if all((name, rep) in log_speeds for name in names))
    k, n = len(names), len(reps)
    if k < 2 or n < 2:
        return None
    counts: dict[tuple[str, int], int] = {}
    for name in names:
        for rep in reps:
            key = (name, positions[(name, rep)])
            counts[key] = counts.get(key, 0) + 1
    if len(counts) != k * k or len(set(counts.values())) != 1:
        return None
    df = n * k - n - 2 * (k - 1)
    if df < 1:
        return None
    grand = _mean([log_speeds[(name, rep)] for name in names for rep in reps])
    by_round = {rep: _mean([log_speeds[(name, rep)] for name in names]) for rep in reps}
    by_variant = {name: _mean([log_speeds[(name, rep)] for rep in reps]) for name in names}
    by_position: dict[int, list[float]] = {}
    for name in names:
        for rep in reps:
            by_position.setdefault(positions[(name, rep)], []).append(log_speeds[(name, rep)])
    position_mean = {position: _mean(values) for position, values in by_position.items()}
    residuals = [
        log_speeds[(name, rep)] - by_round[rep] - by_variant[name] - position_mean[positions[(name, rep)]] + 2 * grand
        for name in names
        for rep in reps
    ]
    return math.sqrt(math.fsum(value * value for value in residuals) / df), df, n


def whole_cycles(runs: Sequence[dict[str, Any]]) -> list[tuple[int, ...]]:
    """The reps of each whole cycle, in order: consecutive blocks of k rounds (k variants) in which
    every variant ran once in every position. A block that is not one (an aborted run, a round
    missing, an order that does not rotate) and a last incomplete block are left out."""
    variants = {run["variant"] for run in runs}
    k = len(variants)
    if k < 2:
        return []
    positions = run_positions(runs)
    reps = sorted({run["rep"] for run in runs})
    found = []
    for start in range(0, len(reps) - k + 1, k):
        block = tuple(reps[start : start + k])
        seen = {(variant, positions.get((variant, rep))) for variant in variants for rep in block}
        complete = all((variant, rep) in positions for variant in variants for rep in block)
        if complete and seen == {(variant, position) for variant in variants for position in range(k)}:
            found.append(block)
    return found


def _speeds(runs: Sequence[dict[str, Any]]) -> dict[tuple[str, int, int], float]:
    """tg_tps by (variant, rep, batch size)."""
    return {(run["variant"], run["rep"], row["batch_size"]): row["tg_tps"] for run in runs for row in run["rows"]}


def information(n_cycles: int) -> float:
    """What a median of n_cycles cycle ratios is worth in cycles: its variance is the per-cycle
    variance divided by this (n for n <= 2, where the median is the mean; n / (pi/2) beyond)."""
    return n_cycles / (MEDIAN_VARIANCE_FACTOR if n_cycles >= 3 else 1.0)


def _stdev(values: Sequence[float]) -> float:
    """The sample standard deviation in floats (statistics.stdev is exact in fractions, and slow)."""
    mean = math.fsum(values) / len(values)
    return math.sqrt(math.fsum((value - mean) ** 2 for value in values) / (len(values) - 1))


def _estimate(
    cycle_logs: list[float], first_cycle: list[float], one_cycle_spread: float | None, df: int
) -> SubmissionEstimate:
    m = len(cycle_logs)
    centre = statistics.median(cycle_logs)
    log_se: float | None
    if m >= 2:
        log_se = _stdev(cycle_logs) / math.sqrt(information(m))
        df = m - 1
    elif one_cycle_spread is not None:
        # One cycle: the spread its cycle ratio carries, what is left of its runs' log speeds after
        # round, variant and position effects (a position's slowdown cancels in the cycle's ratio, so it
        # is not noise): a mean of k round differences of two processes each, 2 sigma^2 / k.
        log_se = one_cycle_spread * math.sqrt(2 / len(first_cycle))
    elif len(first_cycle) >= 2:
        # One cycle of two variants leaves no degree of freedom after position: the rounds' spread,
        # which counts a position's slowdown as noise and so errs wide.
        log_se = _stdev(first_cycle) / math.sqrt(len(first_cycle))
        df = len(first_cycle) - 1
    else:
        log_se = None
        df = len(first_cycle) - 1
    return SubmissionEstimate(
        ratio=math.exp(centre),
        log_se=log_se,
        df=df,
        n_cycles=m,
        cycle_ratios=tuple(math.exp(value) for value in cycle_logs),
    )


def submission_estimates(runs: Sequence[dict[str, Any]], baseline: str) -> dict[tuple[str, int], SubmissionEstimate]:
    """Every cell's estimate, by (variant, batch size), the baseline's own included (ratio 1): the
    runs read once. A cell without a whole cycle in which both sides have a positive, finite rate in
    every round is left out."""
    every = _speeds(runs)
    speeds = {key: value for key, value in every.items() if _usable(value)}
    cycles = whole_cycles(runs)
    cells = sorted({(variant, size) for variant, _, size in every})
    positions = run_positions(runs)
    names = sorted({run["variant"] for run in runs})
    log_speeds = _log_speeds(runs)
    fits: dict[tuple[int, tuple[int, ...]], tuple[float, int, int] | None] = {}  # the same for every variant
    found = {}
    for variant, size in cells:
        cycle_logs: list[float] = []
        first_cycle: list[float] = []
        first_block: tuple[int, ...] = ()
        for block in cycles:
            pairs = [(speeds.get((variant, rep, size)), speeds.get((baseline, rep, size))) for rep in block]
            if any(top is None or bottom is None for top, bottom in pairs):
                continue
            ratios = [math.log(top / bottom) for top, bottom in pairs]  # type: ignore[operator]
            if not first_cycle:
                first_cycle, first_block = ratios, block
            cycle_logs.append(math.fsum(ratios) / len(ratios))
        if not cycle_logs:
            continue
        fitted = None
        if len(cycle_logs) == 1 and variant != baseline:  # the baseline's own ratio is 1 in every round
            if (size, first_block) not in fits:
                fits[(size, first_block)] = _fit(log_speeds.get(size, {}), positions, names, first_block)
            fitted = fits[(size, first_block)]
        spread, df = (fitted[0], fitted[1]) if fitted is not None else (None, 0)
        found[(variant, size)] = _estimate(cycle_logs, first_cycle, spread, df)
    return found


def _usable(value: float | None) -> bool:
    return value is not None and math.isfinite(value) and value > 0


def submission_estimate(
    runs: Sequence[dict[str, Any]], variant: str, baseline: str, batch_size: int
) -> SubmissionEstimate | None:
    """The submission's estimate in the cell (variant, batch_size); None without a whole cycle in
    which both variants have a positive, finite rate in every round."""
    relevant = [{**run, "rows": [row for row in run["rows"] if row["batch_size"] == batch_size]} for run in runs]
    return submission_estimates(relevant, baseline).get((variant, batch_size))
