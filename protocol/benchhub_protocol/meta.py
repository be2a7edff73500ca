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
from collections.abc import Sequence
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


def machine(submissions: Sequence[Submitted]) -> Machine:
    """A machine's value: its submissions weighted by the cycles they ran (their variances share the
    machine's one per-cycle variance, pooled over them)."""
    if len(submissions) == 1:  # most machines of a large group: the same numbers, without the sums
        found = submissions[0]
        weight = information(found.n_cycles)
        return Machine(found.log_ratio, weight, found.df, max(found.log_se**2 * weight, MIN_CYCLE_SD**2))
    weights = [information(found.n_cycles) for found in submissions]
    total = math.fsum(weights)
    centre = math.fsum(w * found.log_ratio for w, found in zip(weights, submissions, strict=True)) / total
    df = sum(found.df for found in submissions)
    variances = [max(found.log_se**2 * w, MIN_CYCLE_SD**2) for w, found in zip(weights, submissions, strict=True)]
    if df > 0:
        pooled = math.fsum(found.df * v for found, v in zip(submissions, variances, strict=True)) / df
    else:
        pooled = max(variances)
    return Machine(centre, total, df, max(pooled, MIN_CYCLE_SD**2))


def mean_of_machines(values: Sequence[Machine]) -> Machine:
    """One machine's values at several batch sizes as one (the headline): the mean of its logs, with
    the per-cycle spread of a mean of values that move together (the conservative end)."""
    sd = math.fsum(math.sqrt(value.cycle_variance) for value in values) / len(values)
    return Machine(
        log_ratio=math.fsum(value.log_ratio for value in values) / len(values),
        information=min(value.information for value in values),
        df=min(value.df for value in values),
        cycle_variance=sd * sd,
    )


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


def moderated_variances(machines: Sequence[Machine]) -> tuple[list[float], float]:
    """Each machine's variance of its value, its per-cycle variance moderated towards the cell's
    typical one; and that typical per-cycle variance."""
    typical = _median([found.cycle_variance for found in machines])
    variances = [
        (PRIOR_DF * typical + found.df * found.cycle_variance) / (PRIOR_DF + found.df) / found.information
        for found in machines
    ]
    return variances, typical


def pool(machines: Sequence[Machine]) -> Pooled:
    """DerSimonian-Laird tau^2, then the random-effects mean with its Hartung-Knapp standard error.
    Logs are taken around the machines' median, so equal values give exactly that value back."""
    k = len(machines)
    centre = _median([found.log_ratio for found in machines])
    ys = [found.log_ratio - centre for found in machines]
    variances, typical = moderated_variances(machines)
    weights = [1.0 / v for v in variances]
    total = math.fsum(weights)
    fixed = math.fsum(w * y for w, y in zip(weights, ys, strict=True)) / total
    q = math.fsum(w * (y - fixed) ** 2 for w, y in zip(weights, ys, strict=True))
    c = total - math.fsum(w * w for w in weights) / total
    tau2 = max(0.0, (q - (k - 1)) / c) if k > 1 and c > 0 else 0.0
    i2 = max(0.0, (q - (k - 1)) / q) if q > 0 else 0.0
    star = [1.0 / (v + tau2) for v in variances]
    total_star = math.fsum(star)
    offset = math.fsum(w * y for w, y in zip(star, ys, strict=True)) / total_star
    spread = math.fsum(w * (y - offset) ** 2 for w, y in zip(star, ys, strict=True)) / (k - 1) if k > 1 else 0.0
    se = math.sqrt(max(spread, 1.0) / total_star)
    deviations = tuple(y - offset for y in ys)
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

    def cdf(x: float) -> float:
        return math.fsum(0.5 * math.erfc((c - x) / (sd * math.sqrt(2.0))) for c in centres) / len(centres)

    def quantile(p: float) -> float:
        low, high = min(centres) - 40 * sd, max(centres) + 40 * sd
        for _ in range(60):
            middle = (low + high) / 2
            if cdf(middle) < p:
                low = middle
            else:
                high = middle
        return (low + high) / 2

    return quantile(0.5 - level / 2), quantile(0.5 + level / 2)
