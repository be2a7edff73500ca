"""The pages' "Copy as Markdown": leaderboard cells and a submission's measurements turned into the
Markdown table of the shared rules (benchhub_protocol.markdown), so a PR shows what the site and the agent show."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence

from benchhub_protocol import markdown

from benchhub.results.board import CellRow, chip_label
from benchhub.results.models import Measurement
from benchhub.web.leaderboard import chip_sort_key, pair_text
from benchhub.web.words import control_label, model_names, short_sha, threshold_note


def _cell(row: CellRow) -> markdown.Cell:
    return markdown.Cell(
        row.batch_size,
        row.baseline_tg_tps,
        row.tg_tps,
        row.speedup,
        row.n_machines,
        row.interval,
        f"{pair_text(row.baseline_tg_tps, row.tg_tps, row.speedup, row.verdict)} {row.verdict_text}",
    )


def _suffix(row: CellRow, commits: int) -> str:
    """What tells a line apart beyond its name: the commit of a ref's variant, a control's label."""
    at = f" at {short_sha(row.commit)}" if commits > 1 else ""
    return at + (f" ({control_label(row.backend)})" if row.control else "")


def _note(cells: Sequence[CellRow]) -> str:
    return threshold_note(cells[0].min_effect) if cells else ""


def campaign_table(cells: Iterable[CellRow], variant: str, *, title: str, permalink: str) -> str:
    """One line per chip, backend and commit: the compared variant's measured cells of one model
    file; controls after the others."""
    rows = [row for row in cells if row.variant == variant and row.n_machines]
    commits = len({row.commit for row in rows})
    by_line: dict[tuple[bool, str, int, str, str], list[CellRow]] = defaultdict(list)
    for row in rows:
        by_line[(row.control, row.chip, row.gpu_cores or 0, row.backend, row.commit)].append(row)
    ordered = sorted(by_line.items(), key=lambda item: (item[0][0], chip_sort_key((*item[0][1:3], "")), item[0][3:]))
    lines = [
        markdown.Line(
            chip_label(found[0].chip, found[0].gpu_cores) + _suffix(found[0], commits), [_cell(r) for r in found]
        )
        for _, found in ordered
    ]
    return markdown.table(lines, title=title, permalink=permalink, note=_note(rows))


def chip_table(sections: Iterable[tuple[str, str, Sequence[CellRow]]], *, title: str, permalink: str) -> str:
    """One line per campaign, model file (a short sha where two share a name), backend, variant and
    commit measured on one chip; sections are (campaign slug, its baseline, its cells). Baselines
    are left out: their change is 1 by definition."""
    by_line: dict[tuple[str, str, str, str, str, str], list[CellRow]] = defaultdict(list)
    every: list[CellRow] = []
    for campaign, baseline, cells in sections:
        for row in cells:
            if row.variant != baseline and row.n_machines:
                by_line[(campaign, row.model_sha256, row.backend, row.quant, row.variant, row.commit)].append(row)
                every.append(row)
    names = model_names([(row.model, row.model_sha256) for row in every])
    commits = Counter(key[:5] for key in by_line)  # commits per (campaign, file, backend, quant, variant)
    lines = [
        markdown.Line(
            f"{key[0]}: {names[key[1]]} ({key[3]}), {key[4]}" + _suffix(found[0], commits[key[:5]]),
            [_cell(row) for row in found],
        )
        for key, found in sorted(by_line.items())
    ]
    return markdown.table(lines, title=title, permalink=permalink, note=_note(every))


def submission_table(measurements: Sequence[Measurement], baseline: str, *, title: str, permalink: str) -> str:
    """One line per variant of one submission: one machine, so no interval."""
    by_variant: dict[str, list[markdown.Cell]] = defaultdict(list)
    excluded: dict[str, set[str]] = defaultdict(set)
    for m in measurements:
        if m.variant_name != baseline and m.tg_tps is not None:
            text = pair_text(m.baseline_tg_tps, m.tg_tps, m.speedup)
            by_variant[m.variant_name].append(
                markdown.Cell(m.batch_size, m.baseline_tg_tps, m.tg_tps, m.speedup, text=text)
            )
            if m.excluded_reason:
                excluded[m.variant_name].add(m.excluded_reason.replace("_", " "))
    lines = [
        markdown.Line(f"{name} (excluded: {', '.join(sorted(excluded[name]))})" if excluded[name] else name, found)
        for name, found in by_variant.items()
    ]
    return markdown.table(lines, title=title, permalink=permalink)
