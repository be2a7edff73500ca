"""Shaping precomputed leaderboard cells into what the pages show: pure functions over rows that
look like LeaderboardCell / ReferenceRow, so the grouping is tested without a database and a page
never aggregates raw measurements. The `148.0→209.9 (+42%)` form is the agent's (markdown.py), so
the site, its Markdown export and the agent print the same numbers."""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple, Protocol

from benchhub_protocol.markdown import format_change, format_pair, format_tps
from django.utils.text import slugify

from benchhub.web.charts import Point, Series

AMORTISATION_FROM, AMORTISATION_TO = 1, 8
CHIP_GENERATIONS = ("M1", "M2", "M3", "M4", "M5")
CHIP_TIERS = ("", "Pro", "Max", "Ultra")


class CellRow(NamedTuple):
    """A LeaderboardCell's displayed fields, read with values_list: pages hold hundreds of cells
    and skip model instances for them."""

    chip: str
    gpu_cores: int | None
    model: str
    model_sha256: str
    quant: str
    variant: str
    batch_size: int
    baseline_tg_tps: float | None
    tg_tps: float | None
    speedup: float | None
    interval: str | None
    ci_low: float | None
    ci_high: float | None
    verdict: str
    n_machines: int
    n_submissions: int
    n_contributors: int
    excluded: dict[str, int]


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


def chip_label(chip: str, gpu_cores: int | None) -> str:
    return f"{chip} ({gpu_cores}-core GPU)" if gpu_cores else chip


def chip_slug(chip: str, gpu_cores: int | None) -> str:
    return slugify(f"{chip} {gpu_cores}c") if gpu_cores else slugify(chip)


@dataclass(frozen=True)
class CellView:
    batch_size: int
    text: str
    details: tuple[str, ...]  # small print under the number: machines and interval, verdict, exclusions
    state: str  # "measured", "excluded" or "empty"
    counts: str = ""  # submissions and contributors, on hover: the small print stays two lines


EXCLUSION_LABELS = {
    "hidden": "hidden or held for a moderator",
    "correctness_failed": "correctness failed",
    "correctness_not_run": "correctness not run",
    "degenerate_output": "degenerate output",
    "run_state": "on battery, low power or throttled",
}


def exclusion_notes(excluded: dict[str, int]) -> tuple[str, ...]:
    return tuple(
        f"{count} excluded: {EXCLUSION_LABELS.get(reason, reason)}" for reason, count in excluded.items() if count
    )


def plural(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"


def interval_note(interval: str | None, low: float | None, high: float | None, n_machines: int) -> str:
    """What the interval is, in words: a page never writes "95%" beside a range."""
    if interval == "95%" and low is not None and high is not None:
        return f"95% CI {format_change(low)} to {format_change(high)}, {plural(n_machines, 'machine')}"
    if interval == "range" and low is not None and high is not None:
        return f"range of {plural(n_machines, 'machine')}: {format_change(low)} to {format_change(high)}"
    return plural(n_machines, "machine")


def cell_view(cell: CellRow | None, batch_size: int) -> CellView:
    if cell is None:
        return CellView(batch_size, "", (), "empty")
    excluded = exclusion_notes(cell.excluded)
    if cell.n_machines == 0:
        return CellView(batch_size, "excluded", excluded, "excluded")
    details = (interval_note(cell.interval, cell.ci_low, cell.ci_high, cell.n_machines), cell.verdict)
    text = format_pair(cell.baseline_tg_tps, cell.tg_tps, cell.speedup)
    counts = f"{plural(cell.n_submissions, 'submission')}, {plural(cell.n_contributors, 'contributor')}"
    return CellView(batch_size, text, (*details, *excluded), "measured", counts)


@dataclass(frozen=True)
class VariantRow:
    variant: str
    is_baseline: bool
    cells: tuple[CellView, ...]
    amortisation: str


@dataclass(frozen=True)
class ReferenceTable:
    label: str
    source: str
    source_url: str
    cells: tuple[CellView, ...]


class ChipNamed:
    """A chip page's name and URL slug, for anything that carries a chip and its GPU core count."""

    chip: str
    gpu_cores: int | None

    @property
    def label(self) -> str:
        return chip_label(self.chip, self.gpu_cores)

    @property
    def slug(self) -> str:
        return chip_slug(self.chip, self.gpu_cores)


@dataclass
class ChipQuantGroup(ChipNamed):
    chip: str
    gpu_cores: int | None
    quant: str
    model: str
    batch_sizes: list[int] = field(default_factory=list)
    rows: list[VariantRow] = field(default_factory=list)
    references: list[ReferenceTable] = field(default_factory=list)
    model_sha256: str = ""
    demo: bool = False  # demo submissions made these rows
    excluded: str = ""  # why no machine counts, when none does


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


def _group_rows(cells: Sequence[CellRow], baseline: str, declared: Sequence[str]) -> list[VariantRow]:
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
    by_variant: dict[str, dict[int, CellRow]] = defaultdict(dict)
    for cell in cells:
        if cell.variant != baseline:
            by_variant[cell.variant][cell.batch_size] = cell
    for variant in _variant_order(by_variant, declared):
        found = by_variant[variant]
        tps = {bs: cell.tg_tps for bs, cell in found.items() if cell.n_machines}
        rows.append(
            VariantRow(
                variant=variant,
                is_baseline=False,
                cells=tuple(cell_view(found.get(bs), bs) for bs in batch_sizes),
                amortisation=amortisation(tps),
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
            CellView(bs, format_pair(r.baseline_tg_tps, r.tg_tps, r.tg_tps / r.baseline_tg_tps), (), "measured")
            if (r := rows.get(bs))
            else CellView(bs, "", (), "empty")
            for bs in batch_sizes
        )
        tables.append(ReferenceTable(f"{machine}, {model}, {variant}", any_row.source, any_row.source_url, cells))
    return tables


def build_board(
    cells: Iterable[CellRow], references: Iterable[ReferenceLike], baseline: str, declared: Sequence[str]
) -> list[ChipQuantGroup]:
    """One group per (chip, GPU cores, model file) holding crowd rows; published rows of the same
    chip and quant sit in the group as separate reference tables, and chips known only from
    published rows get a group of their own with no crowd rows."""
    crowd: dict[tuple[str, int, str], list[CellRow]] = defaultdict(list)
    for cell in cells:
        crowd[(cell.chip, cell.gpu_cores or 0, cell.model_sha256)].append(cell)
    refs_by_chip_quant: dict[tuple[str, str], list[ReferenceLike]] = defaultdict(list)
    for ref in references:
        refs_by_chip_quant[(ref.chip, ref.quant)].append(ref)

    groups: list[ChipQuantGroup] = []
    covered = set()
    for (chip, cores, sha256), group_cells in crowd.items():
        quant, model = group_cells[0].quant, group_cells[0].model
        refs = [r for r in refs_by_chip_quant.get((chip, quant), []) if r.gpu_cores in (None, cores or None)]
        covered.add((chip, quant))
        batch_sizes = sorted({c.batch_size for c in group_cells} | {r.batch_size for r in refs})
        group = ChipQuantGroup(
            chip, cores or None, quant, model, batch_sizes, _group_rows(group_cells, baseline, declared)
        )
        group.references = _reference_tables(refs, batch_sizes)
        group.model_sha256 = sha256
        groups.append(group)
    for (chip, quant), refs in refs_by_chip_quant.items():
        if (chip, quant) not in covered:
            batch_sizes = sorted({r.batch_size for r in refs})
            groups.append(
                ChipQuantGroup(
                    chip,
                    refs[0].gpu_cores,
                    quant,
                    refs[0].model_label,
                    batch_sizes,
                    [],
                    _reference_tables(refs, batch_sizes),
                )
            )
    return sorted(groups, key=lambda g: (g.quant, *chip_sort_key((g.chip, g.gpu_cores or 0, g.model))))


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


def speedup_series(
    cells: Iterable[CellRow], references: Iterable[ReferenceLike], quant: str, variant: str
) -> list[Series]:
    """One line per chip (crowd medians with their interval) plus dotted published lines."""
    by_chip: dict[tuple[str, int], list[Point]] = defaultdict(list)
    for cell in cells:
        if cell.quant == quant and cell.variant == variant and cell.n_machines and cell.speedup is not None:
            low, high = (cell.ci_low, cell.ci_high) if cell.interval == "95%" else (None, None)
            point = Point(cell.batch_size, cell.speedup, low, high, cell.n_machines)
            by_chip[(cell.chip, cell.gpu_cores or 0)].append(point)
    series = [
        Series(chip_label(chip, cores or None), tuple(points))
        for (chip, cores), points in sorted(by_chip.items(), key=lambda item: chip_sort_key((*item[0], "")))
    ]
    ref_points: dict[str, list[Point]] = defaultdict(list)
    for ref in references:
        if ref.quant == quant and ref.variant == variant:
            ref_points[ref.machine_label].append(Point(ref.batch_size, ref.tg_tps / ref.baseline_tg_tps))
    series += [Series(label, tuple(points), reference=True) for label, points in sorted(ref_points.items())]
    return series


def throughput_series(cells: Iterable[CellRow], quant: str, baseline: str) -> list[Series]:
    """Decode t/s per variant against batch size for one chip and quant (baseline included)."""
    by_variant: dict[str, list[Point]] = defaultdict(list)
    baseline_points: dict[int, Point] = {}
    for cell in cells:
        if cell.quant != quant or not cell.n_machines or cell.tg_tps is None:
            continue
        if cell.variant == baseline:
            baseline_points[cell.batch_size] = Point(cell.batch_size, cell.tg_tps, n_machines=cell.n_machines)
            continue
        by_variant[cell.variant].append(Point(cell.batch_size, cell.tg_tps, n_machines=cell.n_machines))
        if cell.baseline_tg_tps is not None and cell.batch_size not in baseline_points:
            baseline_points[cell.batch_size] = Point(cell.batch_size, cell.baseline_tg_tps)
    series = [Series(baseline, tuple(baseline_points.values()))] if baseline_points else []
    return series + [Series(name, tuple(points)) for name, points in sorted(by_variant.items())]


def reference_throughput_series(references: Iterable[ReferenceLike], quant: str) -> list[Series]:
    """Published t/s of one quant as dotted lines: each table's baseline and its variant."""
    points: dict[str, list[Point]] = defaultdict(list)
    for ref in references:
        if ref.quant == quant:
            points[f"{ref.machine_label}: {ref.baseline_variant}"].append(Point(ref.batch_size, ref.baseline_tg_tps))
            points[f"{ref.machine_label}: {ref.variant}"].append(Point(ref.batch_size, ref.tg_tps))
    return [Series(label, tuple(line), reference=True) for label, line in sorted(points.items())]
