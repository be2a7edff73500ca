"""Machines combined as studies are in a meta-analysis (docs/protocol.md section 7, cells v4).

Each submission brings its estimate over whole cycles with its own standard error
(benchhub_protocol.cycles). A machine (a signing key) combines its submissions into one value with
its precision; a cell combines its machines with a random-effects model, which separates the true
spread of effects between machines (tau) from each machine's measurement error:

- a machine's per-cycle variance is its submissions' pooled one, moderated towards the cell's
  typical machine (`PRIOR_DF`): a variance from 2-3 cycles is itself too noisy to weight by;
- tau^2 by DerSimonian-Laird, I^2 from Cochran's Q;
- the typical machine's interval by Hartung-Knapp-Sidik-Jonkman (a t with k - 1 degrees of freedom
  on the weighted spread of the machines, never narrower than the inverse-variance one), which keeps
  its level at 3-5 machines where the normal DerSimonian-Laird interval does not;
- the prediction for one more machine running a stated number of cycles: its true effect spreads
  by tau (shaped as the machines' own spread from EMPIRICAL_FROM machines), its measurement by the
  typical per-cycle variance at that run length.

docs/method.md gives the reasons, and `python -m bench validity` the simulation that checks them.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from dataclasses import dataclass

from benchhub_protocol.cycles import information
from benchhub_protocol.distributions import chi2_upper_tail, normal_quantile, t_quantile

# The weight of the cell's typical per-cycle variance in a machine's own, in degrees of freedom:
# a machine's variance from df degrees of freedom counts df / (df + PRIOR_DF) of its moderated one.
PRIOR_DF = 4
# A per-cycle standard deviation below this (0.1%) is rounding, not precision: identical rounds
# would otherwise give a machine an infinite weight.
MIN_CYCLE_SD = 0.001
# From this many machines the prediction follows the shape of their spread (two populations, a few
# outliers), not a normal one: with 5% outlier machines a normal range held 91% of new machines at
# 50 machines; from 8 machines the shape of so few widened it for a 70/30 split (bench validity).
EMPIRICAL_FROM = 20
MIXTURE_POINTS = 200  # beyond this many machines, their deviations' quantiles shape the mixture
# How close (on the log scale) the mixture's quantiles are found: a millionth of the 0.1% a page prints.
QUANTILE_TOLERANCE = 1e-12


@dataclass(frozen=True)
class Submitted:
    """One submission's estimate in a cell, as a cell reads it."""

    log_ratio: float
    log_se: float
    df: int
    n_cycles: int


@dataclass(frozen=True)
class Machine:
    """One machine's value in a cell: its submissions combined."""

    log_ratio: float  # the cycles-weighted mean of its submissions' log ratios
    information: float  # its cycles, in what its estimate is worth (cycles.information per submission)
    df: int  # degrees of freedom of cycle_variance
    cycle_variance: float  # pooled variance of one cycle's log ratio


@dataclass(frozen=True)
class Machines:
    """A cell's machines as columns, one entry a machine (the Machine fields): what `pool` reads. A
    large group's cells hold thousands of machines, and columns spare an object for each."""

    log_ratio: Sequence[float]
    information: Sequence[float]
    df: Sequence[int]
    cycle_variance: Sequence[float]

    def __len__(self) -> int:
        return len(self.log_ratio)

    def __getitem__(self, index: int) -> Machine:
        return Machine(self.log_ratio[index], self.information[index], self.df[index], self.cycle_variance[index])

    @classmethod
    def of(cls, machines: Sequence[Machine] | Machines) -> Machines:
        if isinstance(machines, Machines):
            return machines
        return cls(
            [found.log_ratio for found in machines],
            [found.information for found in machines],
            [found.df for found in machines],
            [found.cycle_variance for found in machines],
        )


def machines_of(
    owners: Sequence[Hashable],
    log_ratios: Sequence[float],
    log_ses: Sequence[float],
    dfs: Sequence[int],
    n_cycles: Sequence[int],
) -> tuple[list[Hashable], Machines]:
    """Each machine's value from its submissions (one entry a submission, `owners` its machine):
    its submissions weighted by the cycles they ran, their variances sharing the machine's one
    per-cycle variance, pooled over them. The machines in the order they first appear."""
    worth = {count: information(count) for count in set(n_cycles)}
    weights = [worth[count] for count in n_cycles]
    floor = MIN_CYCLE_SD**2
    variances = [max(se**2 * w, floor) for se, w in zip(log_ses, weights, strict=True)]
    if len(set(owners)) == len(owners):  # one submission each, most machines of a large group: no sums
        return list(owners), Machines(list(log_ratios), weights, list(dfs), variances)
    members: dict[Hashable, list[int]] = {}
    for index, owner in enumerate(owners):
        members.setdefault(owner, []).append(index)
    centres, totals, pooled_dfs, pooled = [], [], [], []
    for indices in members.values():
        if len(indices) == 1:
            (index,) = indices
            centres.append(log_ratios[index])
            totals.append(weights[index])
            pooled_dfs.append(dfs[index])
            pooled.append(variances[index])
            continue
        total = math.fsum(weights[i] for i in indices)
        df = sum(dfs[i] for i in indices)
        centres.append(math.fsum(weights[i] * log_ratios[i] for i in indices) / total)
        totals.append(total)
        pooled_dfs.append(df)
        if df > 0:
            variance = math.fsum(dfs[i] * variances[i] for i in indices) / df
        else:
            variance = max(variances[i] for i in indices)
        pooled.append(max(variance, floor))
    found = Machines(centres, totals, pooled_dfs, pooled)
    return list(members), found


def machine(submissions: Sequence[Submitted]) -> Machine:
    """A machine's value: its submissions weighted by the cycles they ran (their variances share the
    machine's one per-cycle variance, pooled over them)."""
    _, found = machines_of(
        [0] * len(submissions),
        [one.log_ratio for one in submissions],
        [one.log_se for one in submissions],
        [one.df for one in submissions],
        [one.n_cycles for one in submissions],
    )
    return found[0]


def mean_over_sizes(sizes: Sequence[Machines]) -> Machines:
    """Each machine's values at several batch sizes as one (the headline), the columns aligned (entry i
    the same machine at every size): the mean of its logs, with the per-cycle spread of a mean of
    values that move together (the mean of their standard deviations: the conservative end)."""
    n = len(sizes)
    sds = zip(*([math.sqrt(value) for value in size.cycle_variance] for size in sizes), strict=True)
    mean_sd = [math.fsum(values) / n for values in sds]
    return Machines(
        [math.fsum(values) / n for values in zip(*(size.log_ratio for size in sizes), strict=True)],
        [min(values) for values in zip(*(size.information for size in sizes), strict=True)],
        [min(values) for values in zip(*(size.df for size in sizes), strict=True)],
        [sd * sd for sd in mean_sd],
    )


def mean_of_machines(values: Sequence[Machine]) -> Machine:
    """One machine's values at several batch sizes as one (mean_over_sizes of one machine)."""
    return mean_over_sizes([Machines.of([value]) for value in values])[0]


@dataclass(frozen=True)
class Pooled:
    """A cell's machines combined: everything its interval, prediction and verdict are built from."""

    k: int
    mean: float  # the typical machine's log ratio (random-effects weighted)
    se: float  # its Hartung-Knapp standard error
    dl_se: float  # the plain DerSimonian-Laird one, sqrt(1 / sum of weights): bench validity compares them
    tau2: float  # between-machine variance of true log ratios (DerSimonian-Laird)
    i2: float  # share of the machines' spread that is between machines
    q: float  # Cochran's Q
    # A new machine's per-cycle variance: the median over machines (their mean, unbiased but pulled
    # up by one-cycle runs, gave ranges that held 85-92% of new machines in bench validity's worlds).
    cycle_variance: float
    deviations: tuple[float, ...] = ()  # each machine's log ratio less the mean

    @property
    def tau(self) -> float:
        return math.sqrt(self.tau2)

    def heterogeneity_p(self) -> float:
        """Cochran's Q test of 'every machine has the same true effect'."""
        return chi2_upper_tail(self.q, self.k - 1) if self.k > 1 else 1.0


def _median(values: Sequence[float]) -> float:
    ordered = sorted(values)
    middle = len(ordered) // 2
    return ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2


def moderated_variances(machines: Sequence[Machine] | Machines) -> tuple[list[float], float]:
    """Each machine's variance of its value, its per-cycle variance moderated towards the cell's
    typical one; and that typical per-cycle variance."""
    columns = Machines.of(machines)
    typical = _median(columns.cycle_variance)
    prior = PRIOR_DF * typical
    variances = [
        (prior + df * variance) / (PRIOR_DF + df) / worth
        for df, variance, worth in zip(columns.df, columns.cycle_variance, columns.information, strict=True)
    ]
    return variances, typical


def pool(machines: Sequence[Machine] | Machines) -> Pooled:
    """DerSimonian-Laird tau^2, then the random-effects mean with its Hartung-Knapp standard error.
    Logs are taken around the machines' median, so equal values give exactly that value back."""
    columns = Machines.of(machines)
    k = len(columns)
    centre = _median(columns.log_ratio)
    ys = [value - centre for value in columns.log_ratio]
    variances, typical = moderated_variances(columns)
    weights = [1.0 / v for v in variances]
    total = math.fsum(weights)
    fixed = math.fsum([w * y for w, y in zip(weights, ys, strict=True)]) / total
    q = math.fsum([w * (y - fixed) ** 2 for w, y in zip(weights, ys, strict=True)])
    c = total - math.fsum([w * w for w in weights]) / total
    tau2 = max(0.0, (q - (k - 1)) / c) if k > 1 and c > 0 else 0.0
    i2 = max(0.0, (q - (k - 1)) / q) if q > 0 else 0.0
    star = [1.0 / (v + tau2) for v in variances]
    total_star = math.fsum(star)
    offset = math.fsum([w * y for w, y in zip(star, ys, strict=True)]) / total_star
    deviations = tuple([y - offset for y in ys])
    spread = math.fsum([w * (y - offset) ** 2 for w, y in zip(star, ys, strict=True)]) / (k - 1) if k > 1 else 0.0
    se = math.sqrt(max(spread, 1.0) / total_star)
    return Pooled(k, centre + offset, se, math.sqrt(1.0 / total_star), tau2, i2, q, typical, deviations)


def confidence_bounds(found: Pooled, level: float) -> tuple[float, float]:
    """The typical machine's log ratio, two-sided at `level`: Hartung-Knapp, t with k - 1 df."""
    half = t_quantile(0.5 + level / 2, found.k - 1) * found.se
    return found.mean - half, found.mean + half


def prediction_bounds(found: Pooled, level: float, cycles: int) -> tuple[float, float]:
    """Where one more machine's estimate falls with probability `level`, measured over `cycles` whole
    cycles: its true effect (tau: normal below EMPIRICAL_FROM machines, else shaped as the machines'
    own deviations), its own measurement, and the uncertainty of the mean."""
    noise = found.cycle_variance / information(cycles) + found.se**2
    if found.k >= EMPIRICAL_FROM and found.tau2 > 0:
        return _mixture_bounds(found, level, noise)
    variance = found.tau2 + noise
    # A normal quantile: the new machine's own noise dominates and is known from every machine's
    # cycles (many degrees of freedom); a t with k - 1 covered 87-96% at 3-8 machines (bench validity).
    half = normal_quantile(0.5 + level / 2) * math.sqrt(variance)
    return found.mean - half, found.mean + half


def _mixture_bounds(found: Pooled, level: float, noise: float) -> tuple[float, float]:
    """The machines' deviations, scaled to spread by tau (their own noise taken out), each blurred
    by a new machine's noise: the quantiles of that mixture."""
    spread = math.sqrt(math.fsum(d * d for d in found.deviations) / found.k)
    scale = found.tau / spread if spread > 0 else 0.0
    ordered = sorted(found.deviations)
    if len(ordered) > MIXTURE_POINTS:  # the deviations' quantiles stand for them: a bounded cost per cell
        ordered = [ordered[int((i + 0.5) * len(ordered) / MIXTURE_POINTS)] for i in range(MIXTURE_POINTS)]
    centres = [found.mean + scale * d for d in ordered]
    sd = math.sqrt(noise)
    root2 = sd * math.sqrt(2.0)
    density = 1.0 / (sd * math.sqrt(2.0 * math.pi) * len(centres))

    def cdf(x: float) -> float:
        return math.fsum([0.5 * math.erfc((c - x) / root2) for c in centres]) / len(centres)

    def pdf(x: float) -> float:
        return density * math.fsum([math.exp(-(((x - c) / sd) ** 2) / 2.0) for c in centres])

    def quantile(p: float) -> float:
        """Newton's method on the mixture's cdf, kept inside a bracket that bisection narrows where a
        step would leave it: the root to double precision in a few evaluations, not sixty."""
        low, high = min(centres) - 40 * sd, max(centres) + 40 * sd
        x = found.mean + (normal_quantile(p) if p > 0.5 else -normal_quantile(1.0 - p)) * math.sqrt(
            scale**2 * spread**2 + noise
        )
        x = min(max(x, low), high)
        for _ in range(100):
            gap = cdf(x) - p
            if gap < 0:
                low = x
            else:
                high = x
            slope = pdf(x)
            step = x - gap / slope if slope > 0 else (low + high) / 2
            if abs(step - x) <= QUANTILE_TOLERANCE or high - low <= QUANTILE_TOLERANCE:
                return step
            x = step if low < step < high else (low + high) / 2
        return x

    return quantile(0.5 - level / 2), quantile(0.5 + level / 2)
