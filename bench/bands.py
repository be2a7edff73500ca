"""Issue 6 target 2: what keeping one cell's bands costs as its values arrive (stats.py, no
database). A band runs out when a tracked rank leaves it or it grows past twice a fresh one; its
cell is then read in full (all n of its values) and given fresh bands. This replays one cell of n
values taking n more, one submission at a time, through the functions the refresh uses, and counts
those full reads, the rows they read and the band rows written, per value added: with values from
the cell's own distribution, and with every new value shifted (a change that moves the cell's
median, the case where bands run out most often)."""

from __future__ import annotations

import random
from bisect import insort

from bench.figures import report
from benchhub.results import stats

SIZES = (100, 1_000, 6_000, 30_000)
SHIFTS = (0.0, 0.1)


def replay(n: int, shift: float, seed: int) -> tuple[int, int, int]:
    """(full reads, rows they read, band rows written) over n values added to a cell of n."""
    rng = random.Random(seed)

    def submission(index: int, shifted: bool) -> dict[str, stats.Ranked]:
        baseline = rng.gauss(100.0, 10.0)
        speedup = rng.gauss(1.2, 0.1) * (1 + shift if shifted else 1)
        key = f"{index:09d}"
        return {"tg_tps": (baseline * speedup, key), "baseline_tg_tps": (baseline, key), "speedup": (speedup, key)}

    columns: dict[str, list[stats.Ranked]] = {column: [] for column in stats.COLUMNS}
    for index in range(n):
        for column, element in submission(index, False).items():
            columns[column].append(element)
    _, fresh = stats.tracked_and_bands(columns)
    bands = {column: band for column, (band, _) in fresh.items()}
    for column in stats.COLUMNS:
        columns[column].sort()
    full_reads = rows_read = written = 0
    for index in range(n, 2 * n):
        added = submission(index, True)
        widened = {column: stats.band_with(bands[column], [added[column]]) for column in stats.COLUMNS}
        for column in stats.COLUMNS:
            insort(columns[column], added[column])
        size = index + 1
        ranks = stats.tracked_ranks(size)
        if all(stats.band_holds(band, size, ranks[column]) for column, (band, _) in widened.items()):
            bands = {column: band for column, (band, _) in widened.items()}
            written += sum(len(taken) for _, taken in widened.values())
            continue
        full_reads += 1
        rows_read += size
        fresh = {column: stats.band_of(columns[column], ranks[column]) for column in stats.COLUMNS}
        bands = {column: band for column, (band, _) in fresh.items()}
        written += sum(len(elements) for _, elements in fresh.values())
    return full_reads, rows_read, written


def run() -> None:
    lines = []
    for shift in SHIFTS:
        for n in SIZES:
            full_reads, rows_read, written = replay(n, shift, seed=n)
            margin = stats.band_margin(2 * n)
            fresh_rows = sum(min(2 * n, max(r) - min(r) + 1 + 2 * margin) for r in stats.tracked_ranks(2 * n).values())
            lines.append(
                f"cell of {n:6d} taking {n} more{f', each shifted +{shift:.0%}' if shift else ''}: "
                f"{full_reads} full read(s) ({1000 * full_reads / n:.2f} per 1,000 values), "
                f"{rows_read / n:.2f} rows read and {written / n:.3f} band rows written per value added; "
                f"fresh bands hold {fresh_rows} rows at {2 * n}"
            )
    report("band upkeep of one cell (issue 6 target 2), pure Python", lines)
