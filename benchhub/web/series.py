"""Chart series from leaderboard cells and published rows: pure functions, as leaderboard.py.
Lines are told apart by what keys a cell (docs/protocol.md section 7): a model file by its sha256 (the
callers pass one file's cells), a variant that follows a ref by its resolved commit, and control
cells are no evidence about the patches."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

from benchhub.results.board import CellRow, chip_label
from benchhub.web.charts import Point, Series
from benchhub.web.leaderboard import ReferenceLike, chip_sort_key
from benchhub.web.words import is_confidence, short_sha


def speedup_series(
    cells: Iterable[CellRow], references: Iterable[ReferenceLike], quant: str, variant: str
) -> list[Series]:
    """One line per chip (crowd medians with their interval) plus dotted published lines. Control
    cells (a backend the patches do not touch) are no evidence about the patches: not drawn. A
    variant that follows a ref gets a line per resolved commit."""
    by_chip: dict[tuple[str, int, str], list[Point]] = defaultdict(list)
    for cell in cells:
        if cell.quant == quant and cell.variant == variant and cell.n_machines and cell.speedup is not None:
            if cell.control:
                continue
            low, high = (cell.ci_low, cell.ci_high) if is_confidence(cell.interval) else (None, None)
            point = Point(cell.batch_size, cell.speedup, low, high, cell.n_machines)
            by_chip[(cell.chip, cell.gpu_cores or 0, cell.commit)].append(point)
    commits: dict[tuple[str, int], set[str]] = defaultdict(set)
    for chip, cores, commit in by_chip:
        commits[(chip, cores)].add(commit)

    def name(chip: str, cores: int, commit: str) -> str:
        label = chip_label(chip, cores or None)
        return f"{label} @ {short_sha(commit)}" if len(commits[(chip, cores)]) > 1 else label

    series = [
        Series(name(*key), tuple(points))
        for key, points in sorted(by_chip.items(), key=lambda item: (*chip_sort_key((*item[0][:2], "")), item[0][2]))
    ]
    ref_points: dict[str, list[Point]] = defaultdict(list)
    for ref in references:
        if ref.quant == quant and ref.variant == variant:
            ref_points[ref.machine_label].append(Point(ref.batch_size, ref.tg_tps / ref.baseline_tg_tps))
    series += [Series(label, tuple(points), reference=True) for label, points in sorted(ref_points.items())]
    return series


def throughput_series(cells: Iterable[CellRow], quant: str, baseline: str) -> list[Series]:
    """Decode t/s per variant against batch size for one chip and model file (baseline included);
    a variant that follows a ref gets a line per resolved commit."""
    by_variant: dict[tuple[str, str], list[Point]] = defaultdict(list)
    baseline_points: dict[int, Point] = {}
    for cell in cells:
        if cell.quant != quant or not cell.n_machines or cell.tg_tps is None:
            continue
        if cell.variant == baseline:
            baseline_points[cell.batch_size] = Point(cell.batch_size, cell.tg_tps, n_machines=cell.n_machines)
            continue
        by_variant[(cell.variant, cell.commit)].append(Point(cell.batch_size, cell.tg_tps, n_machines=cell.n_machines))
        if cell.baseline_tg_tps is not None and cell.batch_size not in baseline_points:
            baseline_points[cell.batch_size] = Point(cell.batch_size, cell.baseline_tg_tps)
    several = {v for v, _ in by_variant if sum(1 for w, _ in by_variant if w == v) > 1}
    series = [Series(baseline, tuple(baseline_points.values()))] if baseline_points else []
    return series + [
        Series(f"{name} @ {short_sha(commit)}" if name in several else name, tuple(points))
        for (name, commit), points in sorted(by_variant.items())
    ]


def reference_throughput_series(references: Iterable[ReferenceLike], quant: str) -> list[Series]:
    """Published t/s of one quant as dotted lines: each table's baseline and its variant."""
    points: dict[str, list[Point]] = defaultdict(list)
    for ref in references:
        if ref.quant == quant:
            points[f"{ref.machine_label}: {ref.baseline_variant}"].append(Point(ref.batch_size, ref.baseline_tg_tps))
            points[f"{ref.machine_label}: {ref.variant}"].append(Point(ref.batch_size, ref.tg_tps))
    return [Series(label, tuple(line), reference=True) for label, line in sorted(points.items())]
