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
import random
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from benchhub_protocol import stats
from benchhub_protocol.cycles import (
    MEDIAN_VARIANCE_FACTOR,
    SubmissionEstimate,
    submission_estimate,
    whole_cycles,
)
from benchhub_protocol.cycles import balanced_spread as _balanced_spread
from benchhub_protocol.words import DEFAULT_MIN_EFFECT

__all__ = ["DEFAULT_MIN_EFFECT"]  # the agent reads it from here
TARGET_SHARE_OF_MIN_EFFECT = 0.5  # the sweep aims for a half-width of min_effect / 2 in its median cell
HALF_WIDTH_TARGET = DEFAULT_MIN_EFFECT * TARGET_SHARE_OF_MIN_EFFECT  # ±1% at the default min_effect
# Per-process SD of log decode speed above which a machine's spread is "high": one H200 measured 1.8-3.0%
# (tests/agent/fixtures/aa-agent-h200); above 5% the machine is busy or throttling.
HIGH_SPREAD = 0.05
# A run-to-run SD of a cell's ratio that one sweep cannot see (the same binaries, another sweep, another
# day), added in quadrature to the within-sweep standard error.
RUN_TO_RUN_SD = 0.002
MIN_ROUNDS = 2  # one round has no spread to speak of: it is never a standard run
# A submission with more rounds is refused (docs/protocol.md, cells). 60 since issue 44: at the per-process
# spread measured on an H100 with an 8B model (1.0-1.4%), the stop needs 7-14 cycles of 3 rounds
# (bench/stopping.py); 60 rounds of 3 variants and 9 batch sizes are about 200 KB of payload (18 rounds
# were 59 KB), well inside BENCHHUB_MAX_BODY_BYTES (1 MiB) and the schema's 512 runs.
MAX_ROUNDS = 60
STOP_ALPHA = 0.05  # each cell's interval holds at every look together, 95% (see `look_level`)
DEFAULT_MAX_SECONDS = 15 * 60  # of sweep, where the campaign states no `max_seconds`


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
    margin = _quantile(0.975, len(logs) - 1) * statistics.stdev(logs) / math.sqrt(len(logs))
    return math.exp(centre - margin), math.exp(centre + margin)


def half_width(ratios: Sequence[float]) -> float | None:
    """The interval's half-width relative to its centre, ±x: exp(margin) - 1, the wider of its two sides."""
    interval = ratio_interval(ratios)
    if interval is None:
        return None
    low, high = interval
    return math.sqrt(high / low) - 1


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
    quantile = _quantile(1 - 0.025 / max(n_tests, 1), df)
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
    return _cell_estimate(runs, variant, baseline, batch_size, n_tests, _balanced_spread(runs, batch_size))


def _cell_estimate(
    runs: list[dict[str, Any]],
    variant: str,
    baseline: str,
    batch_size: int,
    n_tests: int,
    fitted: tuple[float, int, int] | None,
) -> CellEstimate | None:
    """cell_estimate with the batch size's balanced fit given (it is the same for every variant)."""
    ratios = round_ratios(runs, variant, baseline, batch_size)
    if len(ratios) < MIN_ROUNDS:
        return None
    logs = [math.log(ratio) for ratio in ratios]
    centre = statistics.fmean(logs)
    if fitted is not None and fitted[2] == len(ratios):
        spread, df, n_rounds = fitted
        return _interval(centre, spread * math.sqrt(2 / n_rounds), df, n_rounds, spread, n_tests)
    standard_error = statistics.stdev(logs) / math.sqrt(len(logs))
    return _interval(centre, standard_error, len(logs) - 1, len(logs), statistics.stdev(logs) / math.sqrt(2), n_tests)


def cell_estimates(sweep: dict[str, Any], baseline: str) -> dict[tuple[str, int], CellEstimate | None]:
    """Every non-baseline cell of a sweep (docs/protocol.md section 4), keyed by (variant, batch size)."""
    runs = sweep["runs"]
    variants = dict.fromkeys(run["variant"] for run in runs if run["variant"] != baseline)
    fits = {size: _balanced_spread(runs, size) for size in sweep["batch_sizes"]}
    return {
        (variant, size): _cell_estimate(runs, variant, baseline, size, 1, fits[size])
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


# --- Whole cycles and the stop (cells v4; issue 44) -------------------------------------------------
#
# The sweep runs whole cycles: k rounds for k variants in which every variant takes every position once,
# ordered within the cycle at random (a random Latin square: the cyclic rotation with its rounds, its
# positions and its variants shuffled), from a seed the payload records. After each cycle it looks at
# every cell and stops when each one's verdict is settled at the campaign's min_effect.


def cycle_orders(variants: Sequence[str], seed: int, cycle: int) -> list[list[str]]:
    """The k rounds of cycle `cycle` (0-based), each the order its runs go in: a random Latin square, so every
    variant runs once in every position over the cycle, and a slowdown tied to a moment in the cycle cannot
    line up with one variant. The same (variants, seed, cycle) always gives the same orders."""
    k = len(variants)
    rng = random.Random(seed * 1_000_003 + cycle)
    rows, columns, symbols = list(range(k)), list(range(k)), list(variants)
    rng.shuffle(rows)
    rng.shuffle(columns)
    rng.shuffle(symbols)
    return [[symbols[(rows[r] + columns[p]) % k] for p in range(k)] for r in range(k)]


def max_looks(max_rounds: int, n_variants: int) -> int:
    """How many times a sweep capped at max_rounds can look: once after each whole cycle."""
    return max(1, max_rounds // max(1, n_variants))


def look_level(looks: int) -> float:
    """The two-sided error each look's interval may spend when a sweep can look `looks` times (the cap's
    whole cycles, max_looks): STOP_ALPHA / looks. By the union bound (Bonferroni over the looks), a cell's
    intervals then hold at every look together with probability at least 95%, whenever the rule stops and
    whether the time budget ends it sooner: the verdict read where the sweep stopped is as safe as a
    fixed-length sweep's. Spread evenly, not front-loaded: bench/stopping.py found that at the measured noise
    the rule stops in the middle looks, where an even split leaves the interval narrower."""
    return STOP_ALPHA / max(1, looks)


_QUANTILES: dict[tuple[float, int], float] = {}


def _quantile(p: float, df: int) -> float:
    key = (p, df)
    if key not in _QUANTILES:
        _QUANTILES[key] = stats.t_quantile(p, df)
    return _QUANTILES[key]


@dataclass(frozen=True)
class CellVerdict:
    """One cell of one machine's sweep: the submission's estimate (cycles.submission_estimate, the number
    the site shows), the sequential interval around it, and the verdict at min_effect."""

    variant: str
    batch_size: int
    estimate: SubmissionEstimate
    low: float
    high: float
    spread: float | None  # per-process SD of log decode speed (round, variant, position removed)
    df: int
    verdict: str  # stats.decide at min_effect: "faster", "slower", "within", "unclear"
    settled: bool  # the interval lies wholly beyond +-min_effect or wholly inside it

    @property
    def ratio(self) -> float:
        return self.estimate.ratio


def cycle_runs(runs: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The runs of the sweep's whole cycles (cycles.whole_cycles): what every estimate is taken over."""
    counted = {rep for block in whole_cycles(runs) for rep in block}
    return [run for run in runs if run["rep"] in counted]


def judge_cell(
    runs: Sequence[dict[str, Any]], variant: str, baseline: str, batch_size: int, min_effect: float, looks: int
) -> CellVerdict | None:
    """The cell's verdict at a look of a sweep that can look `looks` times (max_looks).

    Centre: the submission's estimate (the median of its cycles' ratios). Standard error: the per-process
    spread of this batch size over the whole cycles (_balanced_spread: the residual of log speed after
    round, variant and position, with many more degrees of freedom than the cycles' own; cycles with a
    disturbed run, see disturbed_rounds, stay out of the spread while another cycle remains, as the median
    keeps them from the centre), as the median of m cycle means of k round ratios carries it:
    sqrt(f * 2 sigma^2 / (k m)), f = pi/2 from 3 cycles on (cycles.MEDIAN_VARIANCE_FACTOR), plus the
    run-to-run term. Quantile: Student's t at look_level(looks). None without a whole cycle."""
    counted = cycle_runs(runs)
    return _judge(counted, _undisturbed(counted), variant, baseline, batch_size, min_effect, looks)


def _judge(
    counted: list[dict[str, Any]],
    spread_runs: list[dict[str, Any]],
    variant: str,
    baseline: str,
    batch_size: int,
    min_effect: float,
    looks: int,
) -> CellVerdict | None:
    found = submission_estimate(counted, variant, baseline, batch_size)
    if found is None:
        return None
    k = len({run["variant"] for run in counted})
    fitted = _balanced_spread(spread_runs, batch_size) or _balanced_spread(counted, batch_size)
    if fitted is not None:
        spread, df, _ = fitted
        factor = MEDIAN_VARIANCE_FACTOR if found.n_cycles >= 3 else 1.0
        standard_error = math.sqrt(factor * 2 * spread**2 / (k * found.n_cycles))
    elif found.log_se is not None and found.df >= 1:
        spread, df, standard_error = None, found.df, found.log_se
    else:
        return None
    quantile = _quantile(1 - look_level(looks) / 2, df)
    margin = quantile * math.sqrt(standard_error**2 + RUN_TO_RUN_SD**2)
    centre = math.log(found.ratio)
    low, high = math.exp(centre - margin), math.exp(centre + margin)
    threshold = max(min_effect, stats.EFFECT_FLOOR)
    settled = low > 1 + threshold or high < 1 - threshold or (low >= 1 - threshold and high <= 1 + threshold)
    verdict = stats.decide(found.ratio, low, high, min_effect)
    return CellVerdict(variant, batch_size, found, low, high, spread, df, verdict, settled)


def _undisturbed(runs: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The runs of the whole cycles in which no run was disturbed, where those cycles are a strict majority:
    only then does the median over cycles lie among the undisturbed cycles' ratios, so that their spread
    speaks for it. Otherwise all the runs (a disturbed cycle then widens the interval, and the sweep goes on:
    with 1 of 2 cycles disturbed, the median of two is their mean, which the disturbance moves)."""
    batch_sizes = sorted({row["batch_size"] for run in runs for row in run["rows"]})
    hit = {item.rep for item in disturbed_rounds(runs, batch_sizes)}
    if not hit:
        return list(runs)
    blocks = whole_cycles(runs)
    clean = [block for block in blocks if not hit & set(block)]
    if 2 * len(clean) <= len(blocks):
        return list(runs)
    kept = {rep for block in clean for rep in block}
    return [run for run in runs if run["rep"] in kept]


def judge_sweep(
    runs: Sequence[dict[str, Any]],
    baseline: str,
    batch_sizes: Sequence[int],
    min_effect: float,
    looks: int | None = None,
) -> dict[tuple[str, int], CellVerdict | None]:
    """Every non-baseline cell's verdict, keyed by (variant, batch size); `looks` defaults to what the
    protocol's round cap allows."""
    variants = dict.fromkeys(run["variant"] for run in runs if run["variant"] != baseline)
    counted = cycle_runs(runs)
    spread_runs = _undisturbed(counted)
    looks = looks or max_looks(MAX_ROUNDS, len(variants) + 1)
    return {
        (variant, size): _judge(counted, spread_runs, variant, baseline, size, min_effect, looks)
        for variant in variants
        for size in batch_sizes
    }


def settled(verdicts: dict[tuple[str, int], CellVerdict | None]) -> bool:
    """The stop: every cell has a verdict and every one is settled."""
    return bool(verdicts) and all(found is not None and found.settled for found in verdicts.values())


def stop_reason(
    runs: Sequence[dict[str, Any]],
    baseline: str,
    batch_sizes: Sequence[int],
    min_effect: float,
    cap_cycles: int,
    elapsed: float,
    max_seconds: float,
) -> str | None:
    """The stop, looked at after each whole cycle: "settled" when every cell is (judged at look_level of
    cap_cycles looks), else "rounds" when the cap leaves no room for another cycle, else "time" when another
    cycle, at the mean cycle's length so far, would end past max_seconds; None: run another cycle."""
    cycles = len(whole_cycles(runs))
    if settled(judge_sweep(runs, baseline, batch_sizes, min_effect, cap_cycles)):
        return "settled"
    if cycles >= cap_cycles:
        return "rounds"
    if cycles and elapsed + elapsed / cycles > max_seconds:
        return "time"
    return None


def cycles_to_settle(spread: float, centre: float, k: int, min_effect: float, limit: int) -> int | None:
    """The first look (cycles) at which a cell with this spread and centre (log ratio) would be settled, if
    both held; None if not by `limit` cycles. The ETA's range comes from this at the spread as measured and
    half as wide again."""
    threshold = math.log1p(max(min_effect, stats.EFFECT_FLOOR))
    for m in range(1, limit + 1):
        factor = MEDIAN_VARIANCE_FACTOR if m >= 3 else 1.0
        standard_error = math.sqrt(factor * 2 * spread**2 / (k * m))
        n = m * k  # rounds; the spread's degrees of freedom as _balanced_spread counts them
        margin = _quantile(1 - look_level(limit) / 2, max(1, n * k - n - 2 * (k - 1))) * math.sqrt(
            standard_error**2 + RUN_TO_RUN_SD**2
        )
        if abs(centre) + margin <= threshold or abs(centre) - margin > threshold:
            return m
    return None


@dataclass(frozen=True)
class Disturbance:
    """A run far off its variant's typical speed: `deviation` is its median (over batch sizes) log-speed
    difference from the variant's median speed at each size, `spread` the machine's own (robust) spread."""

    rep: int
    variant: str
    deviation: float
    spread: float


DISTURBED_SPREADS = 5.0  # a run this many robust SDs off its variant's typical speed is disturbed...
DISTURBED_FLOOR = 0.03  # ...and at least 3% off it: a quiet machine's 0.1% spread would name every wobble


def disturbed_rounds(runs: Sequence[dict[str, Any]], batch_sizes: Sequence[int]) -> list[Disturbance]:
    """The runs disturbed far beyond the machine's own spread (other load, a throttled moment), in run order.
    The spread is 1.4826 x the median absolute deviation over all runs, so the disturbed runs do not set it."""
    by_cell: dict[tuple[str, int], list[float]] = {}
    for run in runs:
        for row in run["rows"]:
            if row["batch_size"] in batch_sizes and row["tg_tps"] > 0:
                by_cell.setdefault((run["variant"], row["batch_size"]), []).append(math.log(row["tg_tps"]))
    typical = {key: statistics.median(values) for key, values in by_cell.items()}
    deviations: list[tuple[dict[str, Any], float]] = []
    for run in sorted(runs, key=lambda item: item["seq"]):
        offsets = [
            math.log(row["tg_tps"]) - typical[(run["variant"], row["batch_size"])]
            for row in run["rows"]
            if (run["variant"], row["batch_size"]) in typical and row["tg_tps"] > 0
        ]
        if offsets:
            deviations.append((run, statistics.median(offsets)))
    if len(deviations) < 4:
        return []
    spread = 1.4826 * statistics.median(abs(value) for _, value in deviations)
    limit = max(DISTURBED_SPREADS * spread, DISTURBED_FLOOR)
    return [Disturbance(run["rep"], run["variant"], value, spread) for run, value in deviations if abs(value) > limit]
