"""Pure statistics for the leaderboard (no ORM, no Django): docs/protocol.md section 7, cells version 4.

A submission's estimate in a cell is over whole rotation cycles, with its own standard error
(benchhub_protocol.cycles). A machine is a signing key; it combines its submissions, and a cell
combines its machines as a meta-analysis combines studies (benchhub_protocol.meta), on logs,
because the noise and the effects are multiplicative:

- `speedup` is the typical machine's ratio (the random-effects mean), `tau` the spread of true
  effects between machines and `i2` the share of the machines' spread that is between them;
- [`ci_low`, `ci_high`] is a Hartung-Knapp interval for the typical machine, Bonferroni-adjusted
  over every interval of the page (cells of every variant and the headlines), so that all of them
  hold at once with 95%;
- [`predict_low`, `predict_high`] is where one more machine running the stated number of cycles
  falls with probability `predict_level`;
- the verdict follows the page-wise interval, the spread between machines and the smallest effect
  worth reporting.

docs/method.md gives the reasons and `python -m bench validity` the simulation that checks them.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import NamedTuple, Protocol

from benchhub_protocol import meta
from benchhub_protocol.distributions import normal_quantile, t_quantile
from benchhub_protocol.words import FASTER, SLOWER, TOO_FEW, UNCLEAR, VARIES, VERDICTS, WITHIN

__all__ = ["VERDICTS", "t_quantile"]  # the agent's page-wise intervals (rounds.py) read it from here

CONFIDENCE = 0.95  # page-wise: every interval of a page holds at once with this probability
INTERVAL_LABEL = "95%, page-wise"
PREDICT_LEVEL = 0.8  # where one more machine falls, per cell
# The run length the prediction is stated for, in whole cycles, where a campaign states none
# (its manifest's sweep.cycles).
PREDICT_CYCLES = 3
# Below 3 machines a t interval has one degree of freedom and an adjusted quantile in the hundreds.
MIN_MACHINES = 3
# A verdict needs an effect that prints as non-zero (format_change shows one decimal under 1%),
# whatever a campaign sets as its min_effect.
EFFECT_FLOOR = 0.001
# "faster" needs the page-wise interval clear of this share of the smallest effect (and "slower" alike).
CLEAR_SHARE = 0.5


def median(values: Sequence[float]) -> float:
    if not values:
        raise ValueError("median of no values")
    ordered = sorted(values)
    middle = len(ordered) // 2
    if len(ordered) % 2:
        return float(ordered[middle])
    return (ordered[middle - 1] + ordered[middle]) / 2


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


# --- Cells, headlines and the page.


@dataclass(frozen=True)
class Row:
    """What a cell reads of one submission: whose machine it ran on and its estimate over whole
    cycles (cycles.submission_estimate)."""

    machine: Hashable  # the signing key: a machine is a key
    contributor: Hashable  # the handle
    speedup: float  # the median of its cycles' ratios
    baseline_tg_tps: float
    log_se: float  # standard error of log(speedup)
    df: int
    n_cycles: int


@dataclass
class Judged:
    """What judging a cell or a headline gives: the typical machine's figure, its interval, where one
    more machine falls and the verdict. Declared once: CellStats, HeadlineStats and the service's read
    rows (benchhub.results.board) extend it. Not frozen, as none of them can be then: a page reads
    hundreds of rows, and a frozen one takes ten times as long to build as a tuple."""

    speedup: float | None
    interval: str | None  # INTERVAL_LABEL, or None below MIN_MACHINES
    ci_low: float | None
    ci_high: float | None
    predict_low: float | None
    predict_high: float | None
    predict_level: float | None
    tau: float | None
    i2: float | None
    verdict: str

    @classmethod
    def point(cls, speedup: float | None, verdict: str = TOO_FEW) -> Judged:
        """A figure without an interval: too few machines, or a published line's."""
        return cls(speedup, None, None, None, None, None, None, None, None, verdict)


@dataclass
class CellStats(Judged):
    baseline_tg_tps: float | None
    tg_tps: float | None
    n_machines: int
    n_submissions: int
    n_contributors: int


@dataclass
class HeadlineStats(Judged):
    n_machines: int


@dataclass(frozen=True)
class PageStats:
    cells: dict[tuple[str, str, int], CellStats]  # key (variant, commit, batch_size)
    headlines: dict[tuple[str, str], HeadlineStats]  # key (variant, commit)


def decide(
    speedup: float,
    low: float,
    high: float,
    min_effect: float,
    *,
    predict: tuple[float, float] | None = None,
    varies: bool = False,
) -> str:
    """The verdict from the page-wise interval [low, high], the estimate itself, the prediction
    range and whether the machines' true effects spread beyond the threshold on both sides."""
    threshold = max(min_effect, EFFECT_FLOOR)
    if varies:
        return VARIES
    # Clear of half the threshold, not of no change: a true change of half the smallest effect then
    # reads "faster" on at most 5% of pages, whatever the number of machines.
    clear = threshold * CLEAR_SHARE
    # Machines that may see the opposite change beyond the threshold do not agree on a direction.
    agree_up = predict is None or predict[0] >= 1.0 - threshold
    agree_down = predict is None or predict[1] <= 1.0 + threshold
    if low > 1.0 + clear and speedup >= 1.0 + threshold and agree_up:
        return FASTER
    if high < 1.0 - clear and speedup <= 1.0 - threshold and agree_down:
        return SLOWER
    inside = [low, high] if predict is None else [low, high, *predict]
    if all(1.0 - threshold <= bound <= 1.0 + threshold for bound in inside):
        return WITHIN
    return UNCLEAR


def spread_beyond(found: meta.Pooled, min_effect: float, n_tests: int) -> bool:
    """Whether the machines disagree beyond the threshold: the range of PREDICT_LEVEL of their true
    effects reaches past it on both sides, and Cochran's Q shows they differ at all (page-wise)."""
    threshold = max(min_effect, EFFECT_FLOOR)
    half = normal_quantile(0.5 + PREDICT_LEVEL / 2) * found.tau
    reaches = math.exp(found.mean - half) < 1.0 - threshold and math.exp(found.mean + half) > 1.0 + threshold
    return reaches and found.heterogeneity_p() < (1.0 - CONFIDENCE) / n_tests


def _judge(machines: meta.Machines, n_tests: int, min_effect: float, predict_cycles: int) -> Judged:
    if not machines:
        return Judged.point(None)
    found = meta.pool(machines)
    speedup = math.exp(found.mean)
    if found.k < MIN_MACHINES:
        return Judged.point(speedup)
    low, high = (math.exp(bound) for bound in meta.confidence_bounds(found, 1.0 - (1.0 - CONFIDENCE) / n_tests))
    predict_low, predict_high = (
        math.exp(bound) for bound in meta.prediction_bounds(found, PREDICT_LEVEL, predict_cycles)
    )
    verdict = decide(
        speedup,
        low,
        high,
        min_effect,
        predict=(predict_low, predict_high),
        varies=spread_beyond(found, min_effect, n_tests),
    )
    return Judged(
        speedup, INTERVAL_LABEL, low, high, predict_low, predict_high, PREDICT_LEVEL, found.tau, found.i2, verdict
    )


CellKey = tuple[str, str, int]  # (variant, commit, batch_size)
HeadlineKey = tuple[str, str]  # (variant, commit)


@dataclass(frozen=True)
class CellSummary:
    """One cell's counted rows reduced to what judging it needs."""

    machines: meta.Machines  # each machine's value
    baseline_tg_tps: float | None  # the geometric mean of the machines' baselines (each its geometric mean)
    n_submissions: int
    n_contributors: int
    owners: tuple[Hashable, ...] = ()  # the machines' keys, in the order of `machines`


@dataclass(frozen=True)
class PageSummary:
    """A page's rows reduced: what `judge_page` takes."""

    cells: dict[CellKey, CellSummary]
    # Over the machines with a value at every headline size, each machine's mean over them.
    headlines: dict[HeadlineKey, meta.Machines]


class Columns(NamedTuple):
    """A cell's counted rows as columns, one entry a submission (the Row fields): what the service
    reads from its database, without an object a row."""

    machine: Sequence[Hashable]
    contributor: Sequence[Hashable]
    speedup: Sequence[float]
    baseline_tg_tps: Sequence[float]
    log_se: Sequence[float]
    df: Sequence[int]
    n_cycles: Sequence[int]

    @classmethod
    def of(cls, rows: Iterable[Row]) -> Columns:
        found = list(rows)
        return cls(
            [row.machine for row in found],
            [row.contributor for row in found],
            [row.speedup for row in found],
            [row.baseline_tg_tps for row in found],
            [row.log_se for row in found],
            [row.df for row in found],
            [row.n_cycles for row in found],
        )


_LARGEST = sys.float_info.max  # x <= it fails for NaN and infinities


def _all_usable(found: Columns) -> bool:
    """Whether every row has a positive, finite ratio and baseline and a finite, non-negative error."""
    return (
        all(0.0 < value <= _LARGEST for value in found.speedup)
        and all(0.0 < value <= _LARGEST for value in found.baseline_tg_tps)
        and all(0.0 <= value <= _LARGEST for value in found.log_se)
    )


def _usable_row(speedup: float, baseline: float, log_se: float) -> bool:
    return _usable(speedup) and _usable(baseline) and math.isfinite(log_se) and log_se >= 0


def _geometric_mean(values: Sequence[float]) -> float:
    """Taken around the values' median, so that equal values give exactly that value back."""
    if len(values) == 1:
        return values[0]
    centre = median(values)
    return centre * math.exp(math.fsum([math.log(value / centre) for value in values]) / len(values))


def _usable_only(found: Columns) -> Columns:
    """The rows a cell can count: never otherwise through ingest, but a stored oddity must not poison it."""
    if _all_usable(found):
        return found
    keep = [_usable_row(*numbers) for numbers in zip(found.speedup, found.baseline_tg_tps, found.log_se, strict=True)]
    kept = [index for index, usable in enumerate(keep) if usable]
    return Columns(
        [found.machine[i] for i in kept],
        [found.contributor[i] for i in kept],
        [found.speedup[i] for i in kept],
        [found.baseline_tg_tps[i] for i in kept],
        [found.log_se[i] for i in kept],
        [found.df[i] for i in kept],
        [found.n_cycles[i] for i in kept],
    )


def _summarise_cell(found: Columns) -> CellSummary:
    found = _usable_only(found)
    log_ratios = [math.log(value) for value in found.speedup]
    owners, machines = meta.machines_of(found.machine, log_ratios, found.log_se, found.df, found.n_cycles)
    if len(owners) == len(found.machine):  # one submission a machine
        baselines = list(found.baseline_tg_tps)
    else:
        by_machine: dict[Hashable, list[float]] = {}
        for owner, baseline in zip(found.machine, found.baseline_tg_tps, strict=True):
            by_machine.setdefault(owner, []).append(baseline)
        baselines = [_geometric_mean(by_machine[owner]) for owner in owners]
    return CellSummary(
        machines=machines,
        baseline_tg_tps=_geometric_mean(baselines) if baselines else None,
        n_submissions=len(found.machine),
        n_contributors=len(set(found.contributor)),
        owners=tuple(owners),
    )


def _headline(by_size: Sequence[CellSummary | None]) -> meta.Machines:
    """Each machine's mean over the headline sizes; a machine missing one of them is left out (its mean
    would be over other sizes)."""
    if not by_size or any(found is None for found in by_size):
        return meta.Machines([], [], [], [])
    sizes = [found for found in by_size if found is not None]
    first = sizes[0].owners
    if all(found.owners == first for found in sizes):  # every machine at every size, in one order
        return meta.mean_over_sizes([found.machines for found in sizes])
    complete = set(first).intersection(*(found.owners for found in sizes[1:]))
    order = [owner for owner in first if owner in complete]
    aligned = []
    for found in sizes:
        index = {owner: i for i, owner in enumerate(found.owners)}
        at = [index[owner] for owner in order]
        machines = found.machines
        aligned.append(
            meta.Machines(
                [machines.log_ratio[i] for i in at],
                [machines.information[i] for i in at],
                [machines.df[i] for i in at],
                [machines.cycle_variance[i] for i in at],
            )
        )
    return meta.mean_over_sizes(aligned) if order else meta.Machines([], [], [], [])


def summarise_columns(cells: Mapping[CellKey, Columns], *, headline_sizes: Sequence[int]) -> PageSummary:
    """Every cell's rows reduced to its machines, and each (variant, commit)'s headline machines."""
    summaries = {key: _summarise_cell(found) for key, found in cells.items()}
    headlines = {
        (variant, commit): _headline([summaries.get((variant, commit, size)) for size in headline_sizes])
        for variant, commit in sorted({(variant, commit) for variant, commit, _ in cells})
    }
    return PageSummary(summaries, headlines)


def summarise_page(cells: Mapping[CellKey, Iterable[Row]], *, headline_sizes: Sequence[int]) -> PageSummary:
    """Every cell's rows reduced to its machines, and each (variant, commit)'s headline machines."""
    return summarise_columns({key: Columns.of(rows) for key, rows in cells.items()}, headline_sizes=headline_sizes)


def judge_page(page: PageSummary, *, min_effect: float, predict_cycles: int = PREDICT_CYCLES) -> PageStats:
    """Every cell's and headline's interval, prediction and verdict, with one Bonferroni family:
    every cell and headline of the page that has an interval."""
    families = [found.machines for found in page.cells.values()] + list(page.headlines.values())
    n_tests = max(sum(1 for machines in families if len(machines) >= MIN_MACHINES), 1)

    found_cells = {}
    for key, summary in page.cells.items():
        judged = _judge(summary.machines, n_tests, min_effect, predict_cycles)
        baseline = summary.baseline_tg_tps
        found_cells[key] = CellStats(
            **vars(judged),
            baseline_tg_tps=baseline,
            tg_tps=None if baseline is None or judged.speedup is None else baseline * judged.speedup,
            n_machines=len(summary.machines),
            n_submissions=summary.n_submissions,
            n_contributors=summary.n_contributors,
        )
    headlines = {
        pair: HeadlineStats(**vars(_judge(machines, n_tests, min_effect, predict_cycles)), n_machines=len(machines))
        for pair, machines in page.headlines.items()
    }
    return PageStats(found_cells, headlines)


def page_stats(
    cells: Mapping[CellKey, Iterable[Row]],
    *,
    headline_sizes: Sequence[int],
    min_effect: float,
    predict_cycles: int = PREDICT_CYCLES,
) -> PageStats:
    """Every cell of one page (one campaign, chip, GPU cores, model file and backend; the baseline's
    cells are not passed) and each (variant, commit)'s headline: the rows summarised, then judged."""
    summary = summarise_page(cells, headline_sizes=headline_sizes)
    return judge_page(summary, min_effect=min_effect, predict_cycles=predict_cycles)


def verdict_label(verdict: str, min_effect: float) -> str:
    """The verdict as pages write it: "within" names its threshold ("within ±2%")."""
    if verdict != WITHIN:
        return verdict
    percent = max(min_effect, EFFECT_FLOOR) * 100
    text = f"{percent:.0f}" if abs(percent - round(percent)) < 1e-9 else f"{percent:.1f}"
    return f"within ±{text}%"


_EVIDENCE_ORDER = {
    FASTER: 0,
    UNCLEAR: 1,
    VARIES: 2,
    WITHIN: 3,
    SLOWER: 4,
    TOO_FEW: 5,
}


class Ranked(Protocol):
    """What the ranking's order reads of a headline: a HeadlineStats, or a stored headline read back."""

    @property
    def verdict(self) -> str: ...
    @property
    def ci_low(self) -> float | None: ...
    @property
    def n_machines(self) -> int: ...


def evidence_key(h: Ranked) -> tuple[int, float, int]:
    """Sort key (ascending) for the ranking, by what the data support: established gains first,
    then unclear lines, lines whose machines disagree, within and slower lines, lines without an
    interval last; inside each group the higher lower bound of the page-wise interval first (the
    gain the data guarantee, not the point estimate), then more machines."""
    bound = -math.log(h.ci_low) if h.ci_low is not None else math.inf
    return (_EVIDENCE_ORDER.get(h.verdict, len(_EVIDENCE_ORDER)), bound, -h.n_machines)
