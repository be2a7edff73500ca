"""meta.py: machines combined as studies (cells v4), against hand computations of DerSimonian-Laird,
Hartung-Knapp and the moderated variances; distributions.py against closed forms."""

from __future__ import annotations

import math

import pytest
from benchhub_protocol import cycles, distributions, meta


def machine(log_ratio: float, cycle_variance: float, n_cycles: int = 4, df: int = 3) -> meta.Machine:
    return meta.Machine(log_ratio, cycles.information(n_cycles), df, cycle_variance)


def test_a_machine_weighs_its_submissions_by_their_cycles_and_pools_their_variance() -> None:
    found = meta.machine([meta.Submitted(0.10, 0.01, 1, 2), meta.Submitted(0.00, 0.02, 5, 6)])
    weights = [2.0, cycles.information(6)]
    assert found.log_ratio == pytest.approx(weights[1] * 0.0 / sum(weights) + weights[0] * 0.10 / sum(weights))
    assert found.information == pytest.approx(sum(weights)) and found.df == 6
    per_cycle = [0.01**2 * weights[0], 0.02**2 * weights[1]]
    assert found.cycle_variance == pytest.approx((1 * per_cycle[0] + 5 * per_cycle[1]) / 6)


def test_identical_rounds_do_not_give_a_machine_infinite_weight() -> None:
    found = meta.machine([meta.Submitted(0.0, 0.0, 2, 3)])
    assert found.cycle_variance == meta.MIN_CYCLE_SD**2


def test_variances_are_moderated_towards_the_typical_machine() -> None:
    machines = [machine(0.0, 1e-4), machine(0.0, 4e-4), machine(0.0, 9e-4, df=0)]
    variances, typical = meta.moderated_variances(machines)
    assert typical == 4e-4
    info = cycles.information(4)
    assert variances[0] == pytest.approx((meta.PRIOR_DF * 4e-4 + 3 * 1e-4) / (meta.PRIOR_DF + 3) / info)
    assert variances[2] == pytest.approx(4e-4 / info), "a machine with no degrees of freedom is the typical one"


def test_pool_is_dersimonian_laird_with_a_hartung_knapp_standard_error() -> None:
    ys = [0.01, 0.05, -0.02, 0.03]
    machines = [machine(y, 4e-4, n_cycles=n) for y, n in zip(ys, (1, 2, 4, 8), strict=True)]
    variances, _ = meta.moderated_variances(machines)
    w = [1 / v for v in variances]
    fixed = sum(wi * y for wi, y in zip(w, ys, strict=True)) / sum(w)
    q = sum(wi * (y - fixed) ** 2 for wi, y in zip(w, ys, strict=True))
    tau2 = max(0.0, (q - 3) / (sum(w) - sum(wi * wi for wi in w) / sum(w)))
    star = [1 / (v + tau2) for v in variances]
    mean = sum(wi * y for wi, y in zip(star, ys, strict=True)) / sum(star)
    spread = sum(wi * (y - mean) ** 2 for wi, y in zip(star, ys, strict=True)) / 3
    found = meta.pool(machines)
    assert tau2 > 0
    assert (found.mean, found.tau2, found.q) == (pytest.approx(mean), pytest.approx(tau2), pytest.approx(q))
    assert found.se == pytest.approx(math.sqrt(max(spread, 1.0) / sum(star)))
    assert found.i2 == pytest.approx((q - 3) / q)
    low, high = meta.confidence_bounds(found, 0.95)
    assert high - found.mean == pytest.approx(distributions.t_quantile(0.975, 3) * found.se)
    assert found.mean - low == pytest.approx(high - found.mean)


def test_the_prediction_widens_for_a_shorter_run() -> None:
    found = meta.pool([machine(y, 4e-4) for y in (0.0, 0.01, 0.02, 0.015)])
    short = meta.prediction_bounds(found, 0.8, 1)
    long = meta.prediction_bounds(found, 0.8, 10)
    assert short[0] < long[0] < found.mean < long[1] < short[1]


@pytest.mark.parametrize(("x", "df", "expected"), [(3.841458820694124, 1, 0.05), (18.307038053275146, 10, 0.05)])
def test_the_chi_squared_tail_matches_the_tables(x: float, df: int, expected: float) -> None:
    assert distributions.chi2_upper_tail(x, df) == pytest.approx(expected, rel=1e-9)


@pytest.mark.parametrize("x", [0.1, 1.0, 2.0, 7.5, 40.0])
def test_the_chi_squared_tail_of_two_degrees_of_freedom_is_an_exponential(x: float) -> None:
    assert distributions.chi2_upper_tail(x, 2) == pytest.approx(math.exp(-x / 2), rel=1e-12)


def test_the_normal_quantile_matches_the_standard_library() -> None:
    from statistics import NormalDist

    for p in (0.6, 0.9, 0.975, 0.999):
        assert distributions.normal_quantile(p) == pytest.approx(NormalDist().inv_cdf(p), rel=1e-12)


def test_from_twenty_machines_the_prediction_follows_the_shape_of_their_spread() -> None:
    halves = [machine(0.04 if i % 2 else -0.04, 1e-6) for i in range(meta.EMPIRICAL_FROM)]
    found = meta.pool(halves)
    low, high = meta.prediction_bounds(found, 0.8, 3)
    assert found.tau == pytest.approx(0.04 * math.sqrt(20 / 19), rel=1e-3)  # a sample spread, less the noise
    # Two populations at ±4%, each blurred by the mean's uncertainty: the 80% range ends inside each
    # population's spread, narrower than a normal range with the same tau.
    half = distributions.normal_quantile(0.9) * math.sqrt(
        found.tau2 + found.cycle_variance / cycles.information(3) + found.se**2
    )
    assert -half < low < -0.041 and 0.041 < high < half
    assert low == pytest.approx(-high)
    normal = meta.prediction_bounds(meta.pool(halves[:-1]), 0.8, 3)
    assert normal[1] > 0.05, "below EMPIRICAL_FROM machines the range is normal"


def test_the_mixture_s_quantiles_are_its_cdf_s_roots() -> None:
    """Newton's steps find what sixty bisections of the mixture's cdf find (to 1e-12 on the log scale)."""
    import random

    rng = random.Random(5)
    machines = [
        machine(rng.gauss(0.0, 0.03) + (0.1 if rng.random() < 0.05 else 0.0), 4e-4 * rng.random() + 1e-6)
        for _ in range(3000)
    ]
    found = meta.pool(machines)
    noise = found.cycle_variance / cycles.information(3) + found.se**2
    spread = math.sqrt(math.fsum(d * d for d in found.deviations) / found.k)
    ordered = sorted(found.deviations)
    ordered = [ordered[int((i + 0.5) * len(ordered) / meta.MIXTURE_POINTS)] for i in range(meta.MIXTURE_POINTS)]
    centres = [found.mean + found.tau / spread * d for d in ordered]
    sd = math.sqrt(noise)

    def bisected(p: float) -> float:
        low, high = min(centres) - 40 * sd, max(centres) + 40 * sd
        for _ in range(60):
            middle = (low + high) / 2
            below = math.fsum(0.5 * math.erfc((c - middle) / (sd * math.sqrt(2.0))) for c in centres) / len(centres)
            low, high = (middle, high) if below < p else (low, middle)
        return (low + high) / 2

    low, high = meta.prediction_bounds(found, 0.8, 3)
    assert found.k >= meta.EMPIRICAL_FROM and found.tau2 > 0
    assert low == pytest.approx(bisected(0.1), abs=1e-12) and high == pytest.approx(bisected(0.9), abs=1e-12)
