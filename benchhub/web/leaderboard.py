"""Shaping precomputed cells into the tables a chip page shows, one table per group: pure functions
over board.CellRow and rows that look like ReferenceRow, so the grouping is tested without a
database and a page never aggregates raw measurements. The `148.0→209.9 (+42%)` form is the agent's (markdown.py), so
the site, its Markdown export and the agent print the same numbers."""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from benchhub_protocol.markdown import format_tps
from benchhub_protocol.words import DEFAULT_MIN_EFFECT

from benchhub.results.board import CellRow, chip_label, chip_slug
from benchhub.web.words import (
    compact_interval,
    control_label,
    effect_text,
    format_change,
    interval_note,
    legend,
    model_names,
    pending_note,
    plural,
    prediction_note,
    short_sha,
    verdict_mark,
)

__all__ = ["format_change", "interval_note", "plural"]  # re-exported for ranking and compare

AMORTISATION_FROM, AMORTISATION_TO = 1, 8
CHIP_GENERATIONS = ("M1", "M2", "M3", "M4", "M5")
CHIP_TIERS = ("", "Pro", "Max", "Ultra")


class ReferenceLike(Protocol):
    baseline_variant: str
    chip: str
    gpu_cores: int | None
    machine_label: str
    model_label: str
    quant: str
    variant: str
    batch_size: int
    baseline_tg_tps: float
    tg_tps: float
    source: str
    source_url: str


def short_id(pk: object) -> str:
    """The last 8 hex digits of a UUIDv7: random bits. Its first 8 are the arrival time and read the
    same for every submission of a day."""
    return str(pk)[-8:]


def human_count(value: int | None) -> str:
    """1720574976 → "1.72 B", three significant digits."""
    if value is None:
        return "–"
    for size, unit in ((1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= size:
            return f"{value / size:.3g} {unit}"
    return str(value)


@dataclass(frozen=True)
class CellView:
    batch_size: int
    text: str  # `148.0→209.9 (+42%)`
    details: tuple[str, ...]  # small print under it: the compact interval, the verdict, pending, exclusions
    state: str  # "measured", "excluded" or "empty"
    full: str = ""  # the whole wording, one sentence a line: the cell's tooltip
    verdict: str = ""  # the verdict word: the mark's class


EXCLUSION_LABELS = {
    "hidden": "hidden by a moderator",
    "withdrawn": "withdrawn",
    "held": "held for a moderator",
    "correctness_failed": "correctness failed",
    "correctness_not_run": "correctness not run",
    "degenerate_output": "degenerate output",
    "run_state": "on battery, low power or throttled",
}


def exclusion_notes(excluded: dict[str, int]) -> tuple[str, ...]:
    return tuple(
        f"{count} excluded: {EXCLUSION_LABELS.get(reason, reason)}" for reason, count in excluded.items() if count
    )


def pair_text(baseline: float | None, value: float | None, speedup: float | None, verdict: str = "") -> str:
    """`148.0→209.9 (+42%)`; the change is the speedup given (a median over machines is not always
    the ratio of the two medians shown), printed so that a verdict never stands beside a zero."""
    if speedup is None and baseline and value is not None:
        speedup = value / baseline
    return f"{format_tps(baseline)}→{format_tps(value)} ({effect_text(speedup, verdict)})"


def cell_view(cell: CellRow | None, batch_size: int) -> CellView:
    if cell is None:
        return CellView(batch_size, "", (), "empty")
    excluded = exclusion_notes(cell.excluded)
    pending = tuple(note for note in (pending_note(cell.n_pending),) if note)
    if cell.n_machines == 0:
        return CellView(batch_size, "pending" if pending else "excluded", (*pending, *excluded), "excluded")
    sentences = (
        interval_note(cell.interval, cell.ci_low, cell.ci_high, cell.n_machines),
        prediction_note(cell.predict_low, cell.predict_high, cell.predict_level, cell.tau, cell.i2),
        cell.verdict_text,
        f"{plural(cell.n_submissions, 'submission')}, {plural(cell.n_contributors, 'contributor')}",
        *pending,
        *excluded,
    )
    text = pair_text(cell.baseline_tg_tps, cell.tg_tps, cell.speedup, cell.verdict)
    details = (
        compact_interval(cell.interval, cell.ci_low, cell.ci_high, cell.n_machines),
        verdict_mark(cell.verdict, cell.min_effect),
        *pending,
        *excluded,
    )
    full = "\n".join(sentence for sentence in sentences if sentence)
    return CellView(batch_size, text, details, "measured", full, cell.verdict)


@dataclass(frozen=True)
class VariantRow:
    variant: str
    is_baseline: bool
    cells: tuple[CellView, ...]
    amortisation: str
    commit: str = ""  # set where the variant follows a ref: the resolved commit its cells are keyed by

    @property
    def short_commit(self) -> str:
        return short_sha(self.commit)


@dataclass(frozen=True)
class ReferenceTable:
    label: str
    source: str
    source_url: str
    cells: tuple[CellView, ...]


class ChipNamed:
    """A chip's name and its page's URL slug, for anything that carries a chip and its GPU core count."""

    chip: str
    gpu_cores: int | None

    @property
    def label(self) -> str:
        return chip_label(self.chip, self.gpu_cores)

    @property
    def slug(self) -> str:
        return chip_slug(self.chip, self.gpu_cores)


@dataclass
class GroupTable(ChipNamed):
    """One group's table on a chip page (board.Group: one campaign, chip, GPU cores, model file, backend)."""

    chip: str
    gpu_cores: int | None
    quant: str
    model: str  # the display name, with a short sha where two files of the board share it
    batch_sizes: list[int] = field(default_factory=list)
    rows: list[VariantRow] = field(default_factory=list)
    references: list[ReferenceTable] = field(default_factory=list)
    model_sha256: str = ""
    backend: str = ""
    control: bool = False
    min_effect: float = DEFAULT_MIN_EFFECT
    demo: bool = False  # demo submissions made these rows
    excluded: str = ""  # why no machine counts, when none does

    @property
    def control_label(self) -> str:
        return control_label(self.backend) if self.control else ""

    @property
    def legend(self) -> str:
        return legend(self.min_effect)


def amortisation(by_batch: dict[int, float | None]) -> str:
    """BS8 throughput over BS1 throughput: how much a batch of 8 buys over decoding one stream."""
    first, last = by_batch.get(AMORTISATION_FROM), by_batch.get(AMORTISATION_TO)
    if not first or not last:
        return "–"
    return f"{last / first:.2f}×"


def _variant_order(names: Iterable[str], declared: Sequence[str]) -> list[str]:
    rank = {name: index for index, name in enumerate(declared)}
    return sorted(set(names), key=lambda name: (rank.get(name, len(rank)), name))


def _baseline_by_batch(cells: Sequence[CellRow], baseline: str) -> dict[int, float | None]:
    """The baseline's throughput per batch size: its own cell where present, else the median the
    variant cells carry (they are the same medians, computed per cell)."""
    values: dict[int, float | None] = {}
    for cell in cells:
        if cell.variant == baseline and cell.tg_tps is not None:
            values[cell.batch_size] = cell.tg_tps
    for cell in cells:
        if cell.batch_size not in values and cell.baseline_tg_tps is not None and cell.n_machines:
            values[cell.batch_size] = cell.baseline_tg_tps
    return values


def _group_rows(
    cells: Sequence[CellRow], baseline: str, declared: Sequence[str], followers: Iterable[str] = ()
) -> list[VariantRow]:
    batch_sizes = sorted({cell.batch_size for cell in cells})
    baseline_tps = _baseline_by_batch(cells, baseline)
    rows = [
        VariantRow(
            variant=baseline,
            is_baseline=True,
            cells=tuple(CellView(bs, format_tps(baseline_tps.get(bs)), (), "measured") for bs in batch_sizes),
            amortisation=amortisation(baseline_tps),
        )
    ]
    # A variant that follows a ref has one row per resolved commit: two commits never pool.
    by_variant: dict[str, dict[str, dict[int, CellRow]]] = defaultdict(lambda: defaultdict(dict))
    for cell in cells:
        if cell.variant != baseline:
            by_variant[cell.variant][cell.commit][cell.batch_size] = cell
    following = set(followers)
    for variant in _variant_order(by_variant, declared):
        for commit, found in sorted(by_variant[variant].items()):
            tps = {bs: cell.tg_tps for bs, cell in found.items() if cell.n_machines}
            rows.append(
                VariantRow(
                    variant=variant,
                    is_baseline=False,
                    cells=tuple(cell_view(found.get(bs), bs) for bs in batch_sizes),
                    amortisation=amortisation(tps),
                    commit=commit if variant in following or len(by_variant[variant]) > 1 else "",
                )
            )
    return rows


def _reference_tables(refs: Sequence[ReferenceLike], batch_sizes: Sequence[int]) -> list[ReferenceTable]:
    by_table: dict[tuple[str, str, str], dict[int, ReferenceLike]] = defaultdict(dict)
    for ref in refs:
        by_table[(ref.machine_label, ref.model_label, ref.variant)][ref.batch_size] = ref
    tables = []
    for (machine, model, variant), rows in sorted(by_table.items()):
        any_row = next(iter(rows.values()))
        cells = tuple(
            CellView(bs, pair_text(r.baseline_tg_tps, r.tg_tps, r.tg_tps / r.baseline_tg_tps), (), "measured")
            if (r := rows.get(bs))
            else CellView(bs, "", (), "empty")
            for bs in batch_sizes
        )
        tables.append(ReferenceTable(f"{machine}, {model}, {variant}", any_row.source, any_row.source_url, cells))

    return tables


def build_board(
    cells: Iterable[CellRow],
    references: Iterable[ReferenceLike],
    baseline: str,
    declared: Sequence[str],
    followers: Iterable[str] = (),
) -> list[GroupTable]:
    """One group per (chip, GPU cores, model file, backend) holding crowd rows; published rows of the
    same chip and quant sit in the group as separate reference tables, and chips known only from
    published rows get a group of their own with no crowd rows. Groups of a backend the patches do
    not touch are controls, placed after the others; `followers` are the variants that follow a ref."""
    crowd: dict[tuple[str, int, str, str], list[CellRow]] = defaultdict(list)
    for cell in cells:
        crowd[(cell.chip, cell.gpu_cores or 0, cell.model_sha256, cell.backend)].append(cell)
    names = model_names([(c[0].model, sha256) for (_, _, sha256, _), c in crowd.items()])
    refs_by_chip_quant: dict[tuple[str, str], list[ReferenceLike]] = defaultdict(list)
    for ref in references:
        refs_by_chip_quant[(ref.chip, ref.quant)].append(ref)

    groups: list[GroupTable] = []
    covered = set()
    for (chip, cores, sha256, backend), group_cells in crowd.items():
        first = group_cells[0]
        refs = [] if first.control else refs_by_chip_quant.get((chip, first.quant), [])
        refs = [r for r in refs if r.gpu_cores in (None, cores or None)]
        if not first.control:
            covered.add((chip, first.quant))
        batch_sizes = sorted({c.batch_size for c in group_cells} | {r.batch_size for r in refs})
        group = GroupTable(
            chip,
            cores or None,
            first.quant,
            names[sha256],
            batch_sizes,
            _group_rows(group_cells, baseline, declared, followers),
            _reference_tables(refs, batch_sizes),
            model_sha256=sha256,
            backend=backend,
            control=first.control,
            min_effect=first.min_effect,
        )
        groups.append(group)
    for (chip, quant), refs in refs_by_chip_quant.items():
        if (chip, quant) not in covered:
            batch_sizes = sorted({r.batch_size for r in refs})
            groups.append(
                GroupTable(
                    chip,
                    refs[0].gpu_cores,
                    quant,
                    refs[0].model_label,
                    batch_sizes,
                    [],
                    _reference_tables(refs, batch_sizes),
                )
            )
    return sorted(groups, key=lambda g: (g.control, g.quant, *chip_sort_key((g.chip, g.gpu_cores or 0, g.model))))


_GENERATION = re.compile(r"\bM(\d+)\b(?:\s+(Pro|Max|Ultra))?")


def chip_sort_key(key: tuple[str, int, str]) -> tuple[int, int, str, int, str]:
    chip, cores, quant = key
    match = _GENERATION.search(chip)
    generation = int(match.group(1)) if match else 99
    tier = CHIP_TIERS.index(match.group(2) or "") if match else 9
    return (generation, tier, chip, cores, quant)


def apple_family(chip: str) -> str | None:
    """'Apple M3 Max' → 'M3 Max'; None for chips outside the M1–M5 families."""
    match = _GENERATION.search(chip)
    if not match or match.group(1) not in {g[1:] for g in CHIP_GENERATIONS}:
        return None
    return f"M{match.group(1)} {match.group(2)}".strip() if match.group(2) else f"M{match.group(1)}"


@dataclass(frozen=True)
class CoverageRow:
    generation: str
    tiers: tuple[tuple[str, bool], ...]  # (family name, has crowd results)


def coverage(measured_chips: Iterable[str]) -> tuple[list[CoverageRow], list[str]]:
    """Which M1–M5 base/Pro/Max/Ultra parts have crowd results, and which other chips do."""
    families = set()
    others = set()
    for chip in measured_chips:
        family = apple_family(chip)
        if family:
            families.add(family)
        else:
            others.add(chip)
    rows = [
        CoverageRow(gen, tuple(((f"{gen} {tier}".strip()), f"{gen} {tier}".strip() in families) for tier in CHIP_TIERS))
        for gen in CHIP_GENERATIONS
    ]
    return rows, sorted(others)
