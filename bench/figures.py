"""Medians, spreads and percentiles, and the one way the suite prints a figure with its conditions."""

from __future__ import annotations

import math
import os
import platform
import statistics
from collections.abc import Sequence


def percentile(values: Sequence[float], share: float) -> float:
    """Nearest-rank percentile (share in [0, 1])."""
    ordered = sorted(values)
    rank = max(1, math.ceil(share * len(ordered)))
    return ordered[rank - 1]


def summary(values: Sequence[float]) -> str:
    """'median (min-max, n=k)': the median of several runs and their spread."""
    if not values:
        return "no runs"
    low, high = min(values), max(values)
    return f"{statistics.median(values):.4g} (spread {low:.4g}-{high:.4g}, n={len(values)})"


def conditions() -> str:
    load = os.getloadavg()
    return (
        f"{os.cpu_count()} cores shared with other work (load average {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}), "
        f"Python {platform.python_version()}"
    )


def report(title: str, lines: Sequence[str]) -> None:
    print(f"\n== {title}\n   conditions: {conditions()}", flush=True)
    for line in lines:
        print(f"   {line}", flush=True)
