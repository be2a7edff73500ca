"""The leaderboard's first table: one line per chip and model file, ranked by the headline figure,
the geometric-mean speedup over the speculative-decoding batch sizes 2–8 (about.html defines it).
Pure functions over CellRow and published rows, like leaderboard.py."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from statistics import geometric_mean
from typing import NamedTuple

from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

from benchhub.web.leaderboard import (
    CellRow,
    ChipNamed,
    ReferenceLike,
    chip_sort_key,
    format_change,
    interval_note,
    plural,
)

HEADLINE_FROM, HEADLINE_TO = 2, 8  # what a speculative-decoding verify step runs (docs/campaigns.md)


class HeadlineRow(NamedTuple):
    """A stored results.models.Headline: per machine the geometric mean over the campaign's BS 2–8,
    then the median over machines, with the interval rules of a cell."""

    chip: str
    gpu_cores: int | None
    model_sha256: str
    variant: str
    batch_sizes: list[int]
    speedup: float | None
    interval: str | None
    ci_low: float | None
    ci_high: float | None
    n_machines: int


@dataclass(frozen=True)
class Headline:
    """The geometric-mean speedup over BS 2–8 of a line: for crowd lines the median over machines
    of each machine's geometric mean, with its interval; for published lines the geometric mean of
    the published speedups, with none."""

    speedup: float
    low: float | None
    high: float | None
    interval: str | None
    n_machines: int
    batch_sizes: tuple[int, ...]

    @property
    def text(self) -> str:
        return format_change(self.speedup)

    @property
    def note(self) -> str:
        return interval_note(self.interval, self.low, self.high, self.n_machines)


def headline(points: Iterable[tuple[int, float]]) -> Headline | None:
    """A published line's headline: the geometric mean of its speedups at BS 2–8 (no interval)."""
    used = sorted((bs, value) for bs, value in points if HEADLINE_FROM <= bs <= HEADLINE_TO)
    if not used:
        return None
    return Headline(geometric_mean(value for _, value in used), None, None, None, 0, tuple(bs for bs, _ in used))


def stored_headline(row: HeadlineRow | None) -> Headline | None:
    if row is None or row.speedup is None:
        return None
    return Headline(row.speedup, row.ci_low, row.ci_high, row.interval, row.n_machines, tuple(row.batch_sizes))


def verdict_summary(cells: Sequence[CellRow]) -> str:
    """One verdict when BS 2–8 agree, else each verdict with the batch sizes that have it."""
    by_verdict: dict[str, list[int]] = defaultdict(list)
    for cell in sorted(cells, key=lambda c: c.batch_size):
        if HEADLINE_FROM <= cell.batch_size <= HEADLINE_TO and cell.n_machines:
            by_verdict[cell.verdict].append(cell.batch_size)
    if len(by_verdict) <= 1:
        return next(iter(by_verdict), "too few machines")
    return "; ".join(f"{verdict} at BS{', BS'.join(map(str, sizes))}" for verdict, sizes in by_verdict.items())


@dataclass(frozen=True)
class RankLine(ChipNamed):
    chip: str
    gpu_cores: int | None
    model: str
    quant: str
    headline: Headline | None
    verdict: str
    curve: tuple[tuple[int, float], ...]  # (batch size, speedup) for the sparkline
    reference: bool = False  # a published row: not signed, never part of crowd medians
    source_url: str = ""
    expected: tuple[int, ...] = ()  # the campaign's batch sizes in 2–8
    model_sha256: str = ""
    demo: bool = False  # demo submissions made this line (seed_demo): examples, not measurements
    excluded: str = ""  # why no machine of this line counts, when none does

    @property
    def partial(self) -> str:
        """Which batch sizes the headline stands on, when not all of the campaign's 2–8."""
        if self.headline is None or self.headline.batch_sizes == self.expected:
            return ""
        return "over BS" + ", BS".join(map(str, self.headline.batch_sizes)) + " only"

    @property
    def machines(self) -> str:
        return "published" if self.reference else plural(self.headline.n_machines if self.headline else 0, "machine")


def rank(
    cells: Iterable[CellRow], headlines: Iterable[HeadlineRow], references: Iterable[ReferenceLike], variant: str
) -> list[RankLine]:
    """Crowd lines (one per chip and model file) and published lines (one per published table),
    best headline first; lines with no headline (no machine measured all of BS 2–8) last."""
    cells, references = list(cells), list(references)
    stored = {(h.chip, h.gpu_cores or 0, h.model_sha256): h for h in headlines if h.variant == variant}
    sizes = {c.batch_size for c in cells} | {r.batch_size for r in references}
    expected = tuple(sorted(bs for bs in sizes if HEADLINE_FROM <= bs <= HEADLINE_TO))
    crowd: dict[tuple[str, int, str], list[CellRow]] = defaultdict(list)
    for cell in cells:
        if cell.variant == variant:
            crowd[(cell.chip, cell.gpu_cores or 0, cell.model_sha256)].append(cell)
    lines = []
    for (chip, cores, sha256), group in crowd.items():
        curve = tuple(sorted((c.batch_size, c.speedup) for c in group if c.n_machines and c.speedup is not None))
        lines.append(
            RankLine(
                chip,
                cores or None,
                group[0].model,
                group[0].quant,
                stored_headline(stored.get((chip, cores, sha256))),
                verdict_summary(group),
                curve,
                expected=expected,
                model_sha256=sha256,
            )
        )
    published: dict[tuple[str, str], list[ReferenceLike]] = defaultdict(list)
    for ref in references:
        if ref.variant == variant:
            published[(ref.machine_label, ref.model_label)].append(ref)
    for (machine, model), refs in published.items():
        curve = tuple(sorted((r.batch_size, r.tg_tps / r.baseline_tg_tps) for r in refs))
        lines.append(
            RankLine(
                refs[0].chip,
                refs[0].gpu_cores,
                f"{model} ({machine})",
                refs[0].quant,
                headline(curve),
                "published, not signed",
                curve,
                reference=True,
                source_url=refs[0].source_url,
                expected=expected,
            )
        )
    return sorted(
        lines,
        key=lambda line: (
            line.headline is None,
            -(line.headline.speedup if line.headline else 0),
            chip_sort_key((line.chip, line.gpu_cores or 0, line.model)),
        ),
    )


SPARK_W, SPARK_H, SPARK_PAD = 132, 30, 3


def sparkline(curve: Sequence[tuple[int, float]], batch_sizes: Sequence[int], low: float, high: float) -> SafeString:
    """Speedup against batch size as a small inline SVG, one x step per batch size of the campaign
    (as the tables' columns) and one y scale for every line of the table, so lines compare; the
    dashed line is parity and the shaded band BS 2–8, the headline's batch sizes."""
    if not curve or not batch_sizes:
        return SafeString("")
    step = (SPARK_W - 2 * SPARK_PAD) / max(len(batch_sizes) - 1, 1)
    column = {bs: SPARK_PAD + index * step for index, bs in enumerate(batch_sizes)}
    span = (high - low) or 1.0

    def y(value: float) -> str:
        return f"{SPARK_PAD + (high - value) / span * (SPARK_H - 2 * SPARK_PAD):.1f}"

    band = [column[bs] for bs in batch_sizes if HEADLINE_FROM <= bs <= HEADLINE_TO]
    # format_html escapes its arguments into strings, so numbers arrive formatted.
    placed = [(f"{column[bs]:.1f}", y(value)) for bs, value in curve if bs in column]
    dots = format_html_join("", '<circle cx="{}" cy="{}" r="1.8"></circle>', placed)
    label = ", ".join(f"BS{bs} {value:.2f}×" for bs, value in curve)
    return format_html(
        '<svg class="spark" viewBox="0 0 {w} {h}" width="{w}" height="{h}" role="img" aria-label="{label}">'
        "<title>Speedup by batch size: {label}</title>"
        '<rect class="band" x="{bx}" y="0" width="{bw}" height="{h}"></rect>'
        '<line class="parity" x1="0" x2="{w}" y1="{one}" y2="{one}"></line>'
        '<polyline points="{points}"></polyline>{dots}</svg>',
        w=SPARK_W,
        h=SPARK_H,
        label=label,
        bx=f"{(band[0] - step / 2) if band else 0:.1f}",
        bw=f"{(band[-1] - band[0] + step) if band else 0:.1f}",
        one=y(1.0),
        points=" ".join(f"{x},{y_}" for x, y_ in placed),
        dots=dots,
    )


@dataclass(frozen=True)
class RankRow:
    line: RankLine
    spark: SafeString


def ranking_rows(lines: Sequence[RankLine], batch_sizes: Sequence[int]) -> list[RankRow]:
    values = [v for line in lines for _, v in line.curve]
    low, high = min([*values, 0.9]), max([*values, 1.1])
    return [RankRow(line, sparkline(line.curve, batch_sizes, low, high)) for line in lines]
