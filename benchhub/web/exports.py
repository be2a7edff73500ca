"""The pages' "Copy as Markdown": leaderboard cells and a submission's measurements turned into the
Markdown table of the shared rules (benchhub_protocol.markdown), so a PR shows what the site and the agent show."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence

from benchhub_protocol import markdown

from benchhub.results.models import Measurement
from benchhub.web.leaderboard import CellRow, chip_label, chip_sort_key


def _cell(row: CellRow) -> markdown.Cell:
    return markdown.Cell(row.batch_size, row.baseline_tg_tps, row.tg_tps, row.speedup, row.n_machines, row.interval)


def campaign_table(cells: Iterable[CellRow], variant: str, *, title: str, permalink: str) -> str:
    """One line per chip: the compared variant's measured cells of one model file."""
    by_chip: dict[tuple[str, int], list[markdown.Cell]] = defaultdict(list)
    for row in cells:
        if row.variant == variant and row.n_machines:
            by_chip[(row.chip, row.gpu_cores or 0)].append(_cell(row))
    lines = [
        markdown.Line(chip_label(chip, cores or None), found)
        for (chip, cores), found in sorted(by_chip.items(), key=lambda item: chip_sort_key((*item[0], "")))
    ]
    return markdown.table(lines, title=title, permalink=permalink)


def chip_table(sections: Iterable[tuple[str, str, Sequence[CellRow]]], *, title: str, permalink: str) -> str:
    """One line per campaign, model file and variant measured on one chip; sections are (campaign
    slug, its baseline, its cells). Baselines are left out: their change is 1 by definition."""
    by_line: dict[tuple[str, str, str, str], list[markdown.Cell]] = defaultdict(list)
    for campaign, baseline, cells in sections:
        for row in cells:
            if row.variant != baseline and row.n_machines:
                by_line[(campaign, row.model, row.quant, row.variant)].append(_cell(row))
    lines = [
        markdown.Line(f"{campaign}: {model} ({quant}), {variant}", found)
        for (campaign, model, quant, variant), found in sorted(by_line.items())
    ]
    return markdown.table(lines, title=title, permalink=permalink)


def submission_table(measurements: Sequence[Measurement], baseline: str, *, title: str, permalink: str) -> str:
    """One line per variant of one submission: one machine, so no interval."""
    by_variant: dict[str, list[markdown.Cell]] = defaultdict(list)
    excluded: dict[str, set[str]] = defaultdict(set)
    for m in measurements:
        if m.variant_name != baseline and m.tg_tps is not None:
            by_variant[m.variant_name].append(markdown.Cell(m.batch_size, m.baseline_tg_tps, m.tg_tps, m.speedup))
            if m.excluded_reason:
                excluded[m.variant_name].add(m.excluded_reason.replace("_", " "))
    lines = [
        markdown.Line(f"{name} (excluded: {', '.join(sorted(excluded[name]))})" if excluded[name] else name, found)
        for name, found in by_variant.items()
    ]
    return markdown.table(lines, title=title, permalink=permalink)
