"""How precisely one submission measured each cell: the 95% interval of its round-paired ratio.

One rule for the agent (when to stop adding rounds: `target_reached`) and the server (the `high_spread`
flag), so that both read the same payload the same way. A round is the runs that share a `rep`; in round
r the ratio of a cell is variant tg_tps / baseline tg_tps at that batch size (docs/protocol.md section 7).

The interval is a Student t interval on the log scale: the noise of llama-batched-bench is per process and
multiplicative, so logs are the natural scale, the interval is the same whichever build is called A, and
t (not z) keeps a few rounds honest about how little they know of the spread. Where the rounds are
balanced (the agent's rotated order), the spread is what remains of each process's log speed after round,
variant and position effects (`cell_estimate`); a run-to-run term is added in quadrature.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from benchhub_protocol import stats

# A campaign's smallest effect worth reporting, where it states none (docs/protocol.md section 6).
DEFAULT_MIN_EFFECT = 0.02
TARGET_SHARE_OF_MIN_EFFECT = 0.5  # the sweep aims for a half-width of min_effect / 2 in its median cell
HALF_WIDTH_TARGET = DEFAULT_MIN_EFFECT * TARGET_SHARE_OF_MIN_EFFECT  # ±1% at the default min_effect
# Per-process SD of log decode speed above which a machine's spread is "high": one H200 measured 1.8-3.0%
# (tests/agent/fixtures/aa-agent-h200); above 5% the machine is busy or throttling.
HIGH_SPREAD = 0.05
# A run-to-run SD of a cell's ratio that one sweep cannot see (the same binaries, another sweep, another
# day), added in quadrature to the within-sweep standard error.
RUN_TO_RUN_SD = 0.002
MIN_ROUNDS = 2  # one round has no spread to speak of: it is never a standard run
MAX_ROUNDS = 30  # a submission with more rounds is refused (docs/protocol.md, cells)

# Two-sided 95% quantiles of Student's t for 1..30 degrees of freedom (scipy.stats.t.ppf(0.975, df)).
_T975 = (
    12.7062, 4.3027, 3.1824, 2.7764, 2.5706, 2.4469, 2.3646, 2.3060, 2.2622, 2.2281,
    2.2010, 2.1788, 2.1604, 2.1448, 2.1314, 2.1199, 2.1098, 2.1009, 2.0930, 2.0860,
    2.0796, 2.0739, 2.0687, 2.0639, 2.0595, 2.0555, 2.0518, 2.0484, 2.0452, 2.0423,
)  # fmt: skip
_Z975 = 1.959964


def t_quantile(df: int) -> float:
    """The 97.5% quantile of Student's t; beyond the table, the Cornish-Fisher expansion (error < 1e-4)."""
    if df <= len(_T975):
        return _T975[df - 1]
    z = _Z975
    return z + (z**3 + z) / (4 * df) + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * df**2)


def round_ratios(runs: list[dict[str, Any]], variant: str, baseline: str, batch_size: int) -> list[float]:
    """The variant's ratio to the baseline in each round where both have a positive row at that batch
    size, in round order. A round that lost one side's row (an aborted run) pairs nothing."""
    speeds: dict[tuple[str, int], float] = {}
    for run in runs:
        for row in run["rows"]:
            if row["batch_size"] == batch_size:
                speeds[(run["variant"], run["rep"])] = row["tg_tps"]
    rounds = sorted({rep for name, rep in speeds if name == variant})
    return [
        speeds[(variant, rep)] / speeds[(baseline, rep)]
        for rep in rounds
        if speeds.get((baseline, rep), 0) > 0 and speeds[(variant, rep)] > 0
    ]


def ratio_interval(ratios: Sequence[float]) -> tuple[float, float] | None:
    """95% interval of the cell's ratio (geometric mean over rounds); None below two rounds."""
    if len(ratios) < MIN_ROUNDS:
        return None
    logs = [math.log(ratio) for ratio in ratios]
    centre = statistics.fmean(logs)
    margin = t_quantile(len(logs) - 1) * statistics.stdev(logs) / math.sqrt(len(logs))
    return math.exp(centre - margin), math.exp(centre + margin)


def half_width(ratios: Sequence[float]) -> float | None:
    """The interval's half-width relative to its centre, ±x: exp(margin) - 1, the wider of its two sides."""
    interval = ratio_interval(ratios)
    if interval is None:
        return None
    low, high = interval
    return math.sqrt(high / low) - 1


def run_positions(runs: list[dict[str, Any]]) -> dict[tuple[str, int], int]:
    """Each run's position in its round (0 = first), from the order the runs ran in (`seq`)."""
    by_round: dict[int, list[dict[str, Any]]] = {}
    for run in runs:
        by_round.setdefault(run["rep"], []).append(run)
    return {
        (run["variant"], rep): index
        for rep, members in by_round.items()
        for index, run in enumerate(sorted(members, key=lambda member: member["seq"]))
    }


@dataclass(frozen=True)
class CellEstimate:
    """A cell's ratio and its 95% interval. `ratio` is the interval's centre (the geometric mean of the
    round-paired ratios), so the printed number and its bounds always belong together."""

    n_rounds: int
    ratio: float
    low: float
    high: float
    spread: float | None  # per-process SD of log decode speed, after round, variant and position effects

    @property
    def half_width(self) -> float:
        return math.sqrt(self.high / self.low) - 1


def _interval(
    centre: float, standard_error: float, df: int, n_rounds: int, spread: float | None, n_tests: int
) -> CellEstimate:
    # Run-to-run variation: what one run cannot see of the next, added in quadrature. With n_tests > 1 the
    # level is Bonferroni-adjusted so that all n_tests intervals of a sweep hold together 95% of the time.
    quantile = t_quantile(df) if n_tests <= 1 else stats.t_quantile(1 - 0.025 / n_tests, df)
    margin = quantile * math.sqrt(standard_error**2 + RUN_TO_RUN_SD**2)
    return CellEstimate(n_rounds, math.exp(centre), math.exp(centre - margin), math.exp(centre + margin), spread)


def cell_estimate(
    runs: list[dict[str, Any]], variant: str, baseline: str, batch_size: int, n_tests: int = 1
) -> CellEstimate | None:
    """The cell's 95% interval. Where every variant ran in the same rounds and each ran equally often in
    each position of a round (the sweep's balanced order), the per-process noise is what is left of every
    run's log speed after round, variant and position effects: a slow process or a slow position then
    neither moves the centre nor hides in the spread of the ratios. Otherwise (an aborted run, a hand-made
    payload) it is the t interval of the round-paired log ratios. None below two paired rounds."""
    ratios = round_ratios(runs, variant, baseline, batch_size)
    if len(ratios) < MIN_ROUNDS:
        return None
    logs = [math.log(ratio) for ratio in ratios]
    centre = statistics.fmean(logs)
    fitted = _balanced_spread(runs, batch_size)
    if fitted is not None and fitted[2] == len(ratios):
        spread, df, n_rounds = fitted
        return _interval(centre, spread * math.sqrt(2 / n_rounds), df, n_rounds, spread, n_tests)
    standard_error = statistics.stdev(logs) / math.sqrt(len(logs))
    return _interval(centre, standard_error, len(logs) - 1, len(logs), statistics.stdev(logs) / math.sqrt(2), n_tests)


def _balanced_spread(runs: list[dict[str, Any]], batch_size: int) -> tuple[float, int, int] | None:
    """(residual SD, its degrees of freedom, rounds) of log speed ~ round + variant + position, when the
    rounds with a row from every variant form a balanced design (each variant equally often in each
    position), where the effects are plain marginal means; None otherwise."""
    positions = run_positions(runs)
    speeds: dict[tuple[str, int], float] = {}
    for run in runs:
        for row in run["rows"]:
            if row["batch_size"] == batch_size and row["tg_tps"] > 0:
                speeds[(run["variant"], run["rep"])] = math.log(row["tg_tps"])
    names = sorted({run["variant"] for run in runs})
    reps = sorted({run["rep"] for run in runs if all((name, run["rep"]) in speeds for name in names)})
    k, n = len(names), len(reps)
    if k < 2 or n < MIN_ROUNDS:
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
    grand = statistics.fmean(speeds[(name, rep)] for name in names for rep in reps)
    by_round = {rep: statistics.fmean(speeds[(name, rep)] for name in names) for rep in reps}
    by_variant = {name: statistics.fmean(speeds[(name, rep)] for rep in reps) for name in names}
    by_position: dict[int, list[float]] = {}
    for name in names:
        for rep in reps:
            by_position.setdefault(positions[(name, rep)], []).append(speeds[(name, rep)])
    position_mean = {position: statistics.fmean(values) for position, values in by_position.items()}
    residuals = [
        speeds[(name, rep)] - by_round[rep] - by_variant[name] - position_mean[positions[(name, rep)]] + 2 * grand
        for name in names
        for rep in reps
    ]
    return math.sqrt(math.fsum(value * value for value in residuals) / df), df, n


def cell_estimates(sweep: dict[str, Any], baseline: str) -> dict[tuple[str, int], CellEstimate | None]:
    """Every non-baseline cell of a sweep (docs/protocol.md section 4), keyed by (variant, batch size)."""
    variants = dict.fromkeys(run["variant"] for run in sweep["runs"] if run["variant"] != baseline)
    return {
        (variant, size): cell_estimate(sweep["runs"], variant, baseline, size)
        for variant in variants
        for size in sweep["batch_sizes"]
    }


def cell_half_widths(sweep: dict[str, Any], baseline: str) -> dict[tuple[str, int], float | None]:
    return {key: found.half_width if found else None for key, found in cell_estimates(sweep, baseline).items()}


def target_half_width(min_effect: float | None) -> float:
    """The precision a sweep aims for: a half-width of half the campaign's smallest effect worth reporting,
    so an estimate inside ±min_effect/2 reads "within" and one beyond 1.5 x min_effect reads "faster"."""
    return (min_effect if min_effect is not None else DEFAULT_MIN_EFFECT) * TARGET_SHARE_OF_MIN_EFFECT


def target_reached(sweep: dict[str, Any], baseline: str, target: float) -> bool:
    """The median cell's interval is within ±target (a cell without one counts as wider): the typical cell
    is as precise as the campaign asks. The cells beyond it keep their own, wider intervals."""
    widths = sorted(math.inf if width is None else width for width in cell_half_widths(sweep, baseline).values())
    if not widths:
        return False
    return widths[(len(widths) - 1) // 2] <= target


def high_spread(sweep: dict[str, Any], baseline: str) -> bool:
    """The machine's per-process spread is high: in the median cell, the SD of one run's log decode speed
    (after round, variant and position effects) is above HIGH_SPREAD. Says nothing of how many rounds ran."""
    spreads = sorted(
        found.spread for found in cell_estimates(sweep, baseline).values() if found and found.spread is not None
    )
    return bool(spreads) and spreads[(len(spreads) - 1) // 2] > HIGH_SPREAD


# Settings compared where the campaign states them; n_ctx only where it pins one (the agent derives it otherwise).
COMPARED_SETTINGS = ("npp", "ntg", "n_ctx", "flash_attn", "n_gpu_layers")


def sweep_differences(sweep: dict[str, Any], campaign_sweep: dict[str, Any]) -> list[str]:
    """What in a sweep's settings (docs/protocol.md 4.4) differs from its campaign's, one phrase per setting; a
    subset of the campaign's batch sizes is not a difference. The service keeps such a result out of
    its cells (flag `nonstandard_sweep`); the agent says so before the run."""
    differences = [
        f"{name} {sweep.get(name)} instead of {campaign_sweep[name]}"
        for name in COMPARED_SETTINGS
        if name in campaign_sweep and sweep.get(name) != campaign_sweep[name]
    ]
    extra, wanted = sorted(sweep.get("extra_args") or []), sorted(campaign_sweep.get("extra_args") or [])
    if extra != wanted:
        differences.append(f"switches [{' '.join(extra)}] instead of [{' '.join(wanted)}]")
    outside = sorted(set(sweep["batch_sizes"]) - set(campaign_sweep.get("batch_sizes", sweep["batch_sizes"])))
    if outside:
        differences.append(f"batch sizes {', '.join(map(str, outside))} outside the campaign's")
    # Settings alone (what the service keeps of a stored submission) say nothing of rounds; more rounds
    # than the campaign's minimum are always fine.
    rounds = len({run["rep"] for run in sweep.get("runs") or []})
    if 0 < rounds < MIN_ROUNDS:
        differences.append(f"{rounds} round instead of at least {MIN_ROUNDS}")
    return differences
