"""How precisely one submission measured each cell: the 95% interval of its round-paired ratio.

One rule for the agent (when to stop adding rounds) and the server (the `high_spread` flag), so that
both read the same payload the same way. A round is the runs that share a `rep`; in round r the
ratio of a cell is variant tg_tps / baseline tg_tps at that batch size (docs/protocol.md, cells).

The interval is a Student t interval on the log ratios (docs/method.md says why): the noise of
llama-batched-bench is per process and multiplicative, so log ratios are the natural scale, the
interval is the same whichever build is called A, and t (not z) is what keeps 2-6 rounds honest
about how little they know of the spread.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from typing import Any

HALF_WIDTH_TARGET = 0.01  # a cell is measured precisely enough when its 95% interval is within ±1%
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


def cell_half_widths(sweep: dict[str, Any], baseline: str) -> dict[tuple[str, int], float | None]:
    """Half-width of every non-baseline cell of a sweep (docs/protocol.md 4.4), keyed by (variant, batch size)."""
    variants = dict.fromkeys(run["variant"] for run in sweep["runs"] if run["variant"] != baseline)
    return {
        (variant, size): half_width(round_ratios(sweep["runs"], variant, baseline, size))
        for variant in variants
        for size in sweep["batch_sizes"]
    }


def high_spread(sweep: dict[str, Any], baseline: str) -> bool:
    """The sweep stopped (at its cap) before every cell was within ±HALF_WIDTH_TARGET. A cell with
    fewer than two paired rounds has no interval and counts as not precise either."""
    return any(width is None or width > HALF_WIDTH_TARGET for width in cell_half_widths(sweep, baseline).values())


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
