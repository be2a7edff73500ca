"""Pure statistics for the leaderboard (no ORM, no Django): docs/protocol.md section 7, cells version 3.

Inside one submission, rounds pair a variant with its baseline: the submission's speedup at a
batch size is the median over rounds of (variant / baseline in the same round). A machine is a
signing key; its value in a cell is the median of its submissions'. Across machines everything is
done on logs, because the noise and the effects are multiplicative:

- `speedup` is the geometric mean of the machines' values (the typical machine's ratio);
- [`ci_low`, `ci_high`] is a Student t interval for it, Bonferroni-adjusted over every interval of
  the page (cells of every variant and the headlines), so that all of them hold at once with 95%;
- [`predict_low`, `predict_high`] is an 80% t prediction interval for one more machine;
- the verdict follows the page-wise interval and the smallest effect worth reporting.

docs/method.md gives the reasons and `python -m bench validity` the simulation that checks them.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache

VERDICTS = ("faster", "slower", "within", "unclear", "too few machines")
CONFIDENCE = 0.95  # page-wise: every interval of a page holds at once with this probability
INTERVAL_LABEL = "95%, page-wise"
PREDICT_LEVEL = 0.8  # where one more machine falls, per cell
# Below 3 machines a t interval has one degree of freedom and an adjusted quantile in the hundreds.
MIN_MACHINES = 3
# A verdict needs an effect that prints as non-zero (format_change shows one decimal under 1%),
# whatever a campaign sets as its min_effect.
EFFECT_FLOOR = 0.001

ABOUT_VERDICTS = (
    "Each cell compares a patched build with the baseline on the same machine, and its number is "
    "the typical machine's change: the geometric mean over machines, where a machine is one signing key. "
    "The interval beside it is 95% page-wise: all the intervals on one chip page hold together 95% of "
    'the time, so identical code shows a "faster" or "slower" somewhere on the page at most 5% of the time. '
    '"faster" or "slower" means that interval excludes no change and the change itself is at least the '
    'campaign\'s smallest effect worth reporting (2% unless the campaign says otherwise); "within ±2%" means '
    "the whole interval lies inside that threshold, so any change is too small to matter. "
    '"unclear" means neither holds yet and more machines would settle it, and "too few machines" means '
    "fewer than 3 machines, too few for an interval at all. "
    'The range labelled "what your Mac will likely see" is another thing: it is where 80% of new machines '
    "of that chip will land, wider than the interval because machines differ from one another."
)


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


# --- Student t quantiles, from the regularized incomplete beta function (no SciPy on either side).


def _beta_fraction(a: float, b: float, x: float) -> float:
    """Continued fraction of the incomplete beta function (modified Lentz)."""
    tiny = 1e-300
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1.0)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    result = d
    for m in range(1, 500):
        even = m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m))
        odd = -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1))
        for numerator in (even, odd):
            d = 1.0 + numerator * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + numerator / c
            c = c if abs(c) > tiny else tiny
            result *= d * c
        if abs(d * c - 1.0) < 1e-15:
            break
    return result


def _beta_regularized(a: float, b: float, x: float) -> float:
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x))
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _beta_fraction(a, b, x) / a
    return 1.0 - front * _beta_fraction(b, a, 1.0 - x) / b


def t_upper_tail(t: float, df: int) -> float:
    """P(T > t) for Student's t with df degrees of freedom, t >= 0."""
    return 0.5 * _beta_regularized(df / 2.0, 0.5, df / (df + t * t))


@lru_cache(maxsize=4096)
def t_quantile(p: float, df: int) -> float:
    """The p-quantile of Student's t (p > 0.5), by bisection on the upper tail to double precision."""
    if not 0.5 < p < 1.0 or df < 1:
        raise ValueError("t_quantile takes 0.5 < p < 1 and df >= 1")
    tail = 1.0 - p
    low, high = 0.0, 1.0
    while t_upper_tail(high, df) > tail:
        high *= 2.0
    for _ in range(200):
        middle = (low + high) / 2.0
        if middle in (low, high):
            break
        if t_upper_tail(middle, df) > tail:
            low = middle
        else:
            high = middle
    return (low + high) / 2.0


# --- Cells, headlines and the page.


@dataclass(frozen=True)
class Row:
    """What a cell reads of one submission: whose machine it ran on and its paired numbers."""

    machine: Hashable  # the signing key: a machine is a key
    contributor: Hashable  # the handle
    speedup: float
    baseline_tg_tps: float


@dataclass(frozen=True)
class CellStats:
    baseline_tg_tps: float | None
    tg_tps: float | None
    speedup: float | None
    interval: str | None  # INTERVAL_LABEL, or None below MIN_MACHINES
    ci_low: float | None
    ci_high: float | None
    predict_low: float | None
    predict_high: float | None
    predict_level: float | None
    verdict: str
    n_machines: int
    n_submissions: int
    n_contributors: int


@dataclass(frozen=True)
class HeadlineStats:
    speedup: float | None
    interval: str | None
    ci_low: float | None
    ci_high: float | None
    predict_low: float | None
    predict_high: float | None
    predict_level: float | None
    verdict: str
    n_machines: int


@dataclass(frozen=True)
class PageStats:
    cells: dict[tuple[str, str, int], CellStats]  # key (variant, commit, batch_size)
    headlines: dict[tuple[str, str], HeadlineStats]  # key (variant, commit)


@dataclass(frozen=True)
class Estimate:
    """The logs of the machines' values, summarised: what the intervals are built from. The logs are
    taken relative to `center` (their median), so that equal values give exactly that value back."""

    n: int
    center: float
    mean: float  # mean of log(value / center): center * exp(mean) is the geometric mean
    sd: float  # their sample standard deviation (0 for one machine)

    def back(self, log_offset: float) -> float:
        return self.center * math.exp(self.mean + log_offset)


@dataclass(frozen=True)
class LogSums:
    """Machines' values reduced to what an Estimate needs, so that a database can do the reduction:
    their count, their median (`center`), and the sum and the sum of squares of log(value / center)."""

    n: int
    center: float
    log_sum: float
    log_square_sum: float


def log_sums(values: Sequence[float]) -> LogSums:
    center = median(values)
    logs = [math.log(value / center) for value in values]
    return LogSums(len(logs), center, math.fsum(logs), math.fsum(value * value for value in logs))


def estimate_from_sums(sums: LogSums) -> Estimate:
    """The Estimate of values summarised by `sums`; the one place an Estimate is built."""
    n = sums.n
    mean = sums.log_sum / n
    # The squared deviations from the mean; logs around their median keep the subtraction exact enough.
    deviations = max(sums.log_square_sum - sums.log_sum * mean, 0.0)
    sd = math.sqrt(deviations / (n - 1)) if n > 1 else 0.0
    return Estimate(n, sums.center, mean, sd)


def estimate(values: Sequence[float]) -> Estimate:
    return estimate_from_sums(log_sums(values))


def confidence_bounds(found: Estimate, n_tests: int) -> tuple[float, float]:
    """Two-sided t interval of the geometric mean at level 1 - (1 - CONFIDENCE) / n_tests (Bonferroni)."""
    quantile = t_quantile(1.0 - (1.0 - CONFIDENCE) / (2 * n_tests), found.n - 1)
    half = quantile * found.sd / math.sqrt(found.n)
    return found.back(-half), found.back(half)


def prediction_bounds(found: Estimate) -> tuple[float, float]:
    """Where one more machine's value falls with probability PREDICT_LEVEL (t prediction interval)."""
    quantile = t_quantile(0.5 + PREDICT_LEVEL / 2, found.n - 1)
    half = quantile * found.sd * math.sqrt(1.0 + 1.0 / found.n)
    return found.back(-half), found.back(half)


def decide(speedup: float, low: float, high: float, min_effect: float) -> str:
    """The verdict from the page-wise interval [low, high] and the estimate itself."""
    threshold = max(min_effect, EFFECT_FLOOR)
    if low > 1.0 and speedup >= 1.0 + threshold:
        return "faster"
    if high < 1.0 and speedup <= 1.0 - threshold:
        return "slower"
    if low >= 1.0 - threshold and high <= 1.0 + threshold:
        return "within"
    return "unclear"


@dataclass(frozen=True)
class _Judged:
    speedup: float | None
    interval: str | None
    ci_low: float | None
    ci_high: float | None
    predict_low: float | None
    predict_high: float | None
    predict_level: float | None
    verdict: str


def _judge(found: Estimate | None, n_tests: int, min_effect: float) -> _Judged:
    if found is None:
        return _Judged(None, None, None, None, None, None, None, "too few machines")
    speedup = found.back(0.0)
    if found.n < MIN_MACHINES:
        return _Judged(speedup, None, None, None, None, None, None, "too few machines")
    low, high = confidence_bounds(found, n_tests)
    predict_low, predict_high = prediction_bounds(found)
    return _Judged(
        speedup,
        INTERVAL_LABEL,
        low,
        high,
        predict_low,
        predict_high,
        PREDICT_LEVEL,
        decide(speedup, low, high, min_effect),
    )


def _geometric_mean(values: Sequence[float]) -> float:
    return estimate(values).back(0.0)


CellKey = tuple[str, str, int]  # (variant, commit, batch_size)
HeadlineKey = tuple[str, str]  # (variant, commit)


@dataclass(frozen=True)
class CellSummary:
    """One cell's counted rows reduced to what judging it needs."""

    machines: LogSums | None  # each machine's value (the median of its speedups); None without one
    baseline_tg_tps: float | None  # the geometric mean of the machines' baselines (each its median)
    n_submissions: int
    n_contributors: int


@dataclass(frozen=True)
class PageSummary:
    """A page's rows reduced: what `judge_page` takes, from `summarise_page` or from a database."""

    cells: dict[CellKey, CellSummary]
    # Over the machines with a value at every headline size, each machine's geometric mean of them.
    headlines: dict[HeadlineKey, LogSums | None]


def summarise_page(cells: Mapping[CellKey, Iterable[Row]], *, headline_sizes: Sequence[int]) -> PageSummary:
    """Every cell's rows reduced to its summary, and each (variant, commit)'s headline values."""
    machine_values: dict[CellKey, dict[Hashable, float]] = {}
    summaries: dict[CellKey, CellSummary] = {}
    for key, rows in cells.items():
        speedups: dict[Hashable, list[float]] = defaultdict(list)
        baseline_by_machine: dict[Hashable, list[float]] = defaultdict(list)
        contributors = set()
        n_submissions = 0
        for row in rows:
            if not (_usable(row.speedup) and _usable(row.baseline_tg_tps)):
                continue  # never reached through ingest's bounds; a stored oddity must not poison the cell
            speedups[row.machine].append(row.speedup)
            baseline_by_machine[row.machine].append(row.baseline_tg_tps)
            contributors.add(row.contributor)
            n_submissions += 1
        machine_values[key] = {machine: median(values) for machine, values in speedups.items()}
        baselines = [median(values) for values in baseline_by_machine.values()]
        summaries[key] = CellSummary(
            machines=log_sums(list(machine_values[key].values())) if machine_values[key] else None,
            baseline_tg_tps=_geometric_mean(baselines) if baselines else None,
            n_submissions=n_submissions,
            n_contributors=len(contributors),
        )

    headlines: dict[HeadlineKey, LogSums | None] = {}
    for variant, commit in sorted({(variant, commit) for variant, commit, _ in cells}):
        by_size = [machine_values.get((variant, commit, size), {}) for size in headline_sizes]
        # A machine missing one of the sizes is left out: its mean would be over other sizes.
        complete = set.intersection(*(set(values) for values in by_size)) if by_size else set()
        values = [_geometric_mean([found[machine] for found in by_size]) for machine in sorted(complete, key=repr)]
        headlines[(variant, commit)] = log_sums(values) if values else None
    return PageSummary(summaries, headlines)


def judge_page(page: PageSummary, *, min_effect: float) -> PageStats:
    """Every cell's and headline's interval, prediction and verdict, with one Bonferroni family:
    every cell and headline of the page that has an interval."""
    cell_estimates = {
        key: estimate_from_sums(found.machines) if found.machines else None for key, found in page.cells.items()
    }
    headline_estimates = {key: estimate_from_sums(found) if found else None for key, found in page.headlines.items()}
    n_tests = sum(
        1 for found in (*cell_estimates.values(), *headline_estimates.values()) if found and found.n >= MIN_MACHINES
    )
    n_tests = max(n_tests, 1)

    found_cells = {}
    for key, found in cell_estimates.items():
        judged = _judge(found, n_tests, min_effect)
        summary = page.cells[key]
        baseline = summary.baseline_tg_tps
        found_cells[key] = CellStats(
            baseline_tg_tps=baseline,
            tg_tps=None if baseline is None or judged.speedup is None else baseline * judged.speedup,
            speedup=judged.speedup,
            interval=judged.interval,
            ci_low=judged.ci_low,
            ci_high=judged.ci_high,
            predict_low=judged.predict_low,
            predict_high=judged.predict_high,
            predict_level=judged.predict_level,
            verdict=judged.verdict,
            n_machines=found.n if found else 0,
            n_submissions=summary.n_submissions,
            n_contributors=summary.n_contributors,
        )
    headlines = {}
    for pair, found in headline_estimates.items():
        judged = _judge(found, n_tests, min_effect)
        headlines[pair] = HeadlineStats(
            speedup=judged.speedup,
            interval=judged.interval,
            ci_low=judged.ci_low,
            ci_high=judged.ci_high,
            predict_low=judged.predict_low,
            predict_high=judged.predict_high,
            predict_level=judged.predict_level,
            verdict=judged.verdict,
            n_machines=found.n if found else 0,
        )
    return PageStats(found_cells, headlines)


def page_stats(
    cells: Mapping[CellKey, Iterable[Row]], *, headline_sizes: Sequence[int], min_effect: float
) -> PageStats:
    """Every cell of one page (one campaign, chip, GPU cores, model file and backend; the baseline's
    cells are not passed) and each (variant, commit)'s headline: the rows summarised, then judged."""
    return judge_page(summarise_page(cells, headline_sizes=headline_sizes), min_effect=min_effect)


def verdict_label(verdict: str, min_effect: float) -> str:
    """The verdict as pages write it: "within" names its threshold ("within ±2%")."""
    if verdict != "within":
        return verdict
    percent = max(min_effect, EFFECT_FLOOR) * 100
    text = f"{percent:.0f}" if abs(percent - round(percent)) < 1e-9 else f"{percent:.1f}"
    return f"within ±{text}%"


_EVIDENCE_ORDER = {"faster": 0, "unclear": 1, "within": 2, "slower": 3, "too few machines": 4}


def evidence_key(h: HeadlineStats) -> tuple[int, float, int]:
    """Sort key (ascending) for the ranking, by what the data support: established gains first,
    then unclear, within and slower lines, lines without an interval last; inside each group the
    higher lower bound of the page-wise interval first (the gain the data guarantee, not the point
    estimate), then more machines."""
    bound = -math.log(h.ci_low) if h.ci_low is not None else math.inf
    return (_EVIDENCE_ORDER.get(h.verdict, len(_EVIDENCE_ORDER)), bound, -h.n_machines)
