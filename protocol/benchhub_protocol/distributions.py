"""The distribution functions the cells need, in pure Python (no SciPy on either side): Student t
quantiles and the chi-squared upper tail, each to double precision."""

from __future__ import annotations

import math
from functools import lru_cache


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


def chi2_upper_tail(x: float, df: int) -> float:
    """P(X > x) for chi-squared with df degrees of freedom: the regularized upper incomplete gamma
    Q(df/2, x/2), by its series below a + 1 and its continued fraction (modified Lentz) above."""
    a, z = df / 2.0, x / 2.0
    if z <= 0.0:
        return 1.0
    front = math.exp(a * math.log(z) - z - math.lgamma(a))
    if z < a + 1.0:
        term = total = 1.0 / a
        for n in range(1, 1000):
            term *= z / (a + n)
            total += term
            if abs(term) < abs(total) * 1e-16:
                break
        return max(0.0, 1.0 - front * total)
    tiny = 1e-300
    b = z + 1.0 - a
    c, d = 1.0 / tiny, 1.0 / b
    result = d
    for n in range(1, 1000):
        an = -n * (n - a)
        b += 2.0
        d = an * d + b
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = b + an / c
        c = c if abs(c) > tiny else tiny
        result *= d * c
        if abs(d * c - 1.0) < 1e-16:
            break
    return front * result


@lru_cache(maxsize=256)
def normal_quantile(p: float) -> float:
    """The p-quantile of the standard normal (p > 0.5), by bisection on erfc."""
    if not 0.5 < p < 1.0:
        raise ValueError("normal_quantile takes 0.5 < p < 1")
    low, high = 0.0, 40.0
    for _ in range(200):
        middle = (low + high) / 2.0
        if middle in (low, high):
            break
        if 0.5 * math.erfc(middle / math.sqrt(2.0)) > 1.0 - p:
            low = middle
        else:
            high = middle
    return (low + high) / 2.0
