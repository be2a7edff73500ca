"""The leaderboard's first table: one line per chip, model file, backend and variant commit, with
the headline figure, the geometric-mean speedup over the speculative-decoding batch sizes 2–8
(about.html defines it), ordered by evidence (words.evidence_key), never by the point estimate.
Lines measured on a backend the patches do not touch are controls, kept apart. Pure functions over
CellRow and published rows, like leaderboard.py."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from statistics import geometric_mean
from typing import NamedTuple

from benchhub_protocol import stats
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

from benchhub.web.leaderboard import CellRow, ChipNamed, ReferenceLike, chip_sort_key
from benchhub.web.words import (
    DIRECTIONAL,
    TOO_FEW,
    control_label,
    effect_text,
    evidence_key,
    interval_note,
    model_names,
    pending_note,
    plural,
    prediction_note,
    short_sha,
    verdict_label,
)

HEADLINE_FROM, HEADLINE_TO = 2, 8  # what a speculative-decoding verify step runs (docs/campaigns.md)


class HeadlineRow(NamedTuple):
    """A stored results.models.Headline: per machine the geometric mean over the campaign's BS 2–8,
    then the typical machine's figure with its interval, prediction and verdict (stats.page_stats)."""

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
    verdict: str = TOO_FEW
    backend: str = ""
    commit: str = ""
    control: bool = False
    predict_low: float | None = None
    predict_high: float | None = None
    predict_level: float | None = None
    tau: float | None = None
    i2: float | None = None


@dataclass(frozen=True)
class LineFigure:
    """The geometric-mean speedup over BS 2–8 of a line: for crowd lines the typical machine's
    figure over each machine's geometric mean, with its interval; for published lines the geometric mean of
    the published speedups, with none."""

    speedup: float
    low: float | None
    high: float | None
    interval: str | None
    n_machines: int
    batch_sizes: tuple[int, ...]
    verdict: str = ""
    predict_low: float | None = None
    predict_high: float | None = None
    predict_level: float | None = None
    tau: float | None = None
    i2: float | None = None

    @property
    def text(self) -> str:
        return effect_text(self.speedup, self.verdict)

    @property
    def established(self) -> bool:
        """Only a "faster" or "slower" verdict presents the change as shown (in bold)."""
        return self.verdict in DIRECTIONAL

    @property
    def note(self) -> str:
        return interval_note(self.interval, self.low, self.high, self.n_machines)

    @property
    def prediction(self) -> str:
        return prediction_note(self.predict_low, self.predict_high, self.predict_level, self.tau, self.i2)


def headline(points: Iterable[tuple[int, float]]) -> LineFigure | None:
    """A published line's headline: the geometric mean of its speedups at BS 2–8 (no interval)."""
    used = sorted((bs, value) for bs, value in points if HEADLINE_FROM <= bs <= HEADLINE_TO)
    if not used:
        return None
    return LineFigure(geometric_mean(value for _, value in used), None, None, None, 0, tuple(bs for bs, _ in used))


def stored_headline(row: HeadlineRow | None) -> LineFigure | None:
    if row is None or row.speedup is None:
        return None
    return LineFigure(
        row.speedup,
        row.ci_low,
        row.ci_high,
        row.interval,
        row.n_machines,
        tuple(row.batch_sizes),
        row.verdict,
        row.predict_low,
        row.predict_high,
        row.predict_level,
        row.tau,
        row.i2,
    )


def as_stats(row: HeadlineRow) -> stats.HeadlineStats:
    """A stored headline as the shared rules read it (evidence_key)."""
    return stats.HeadlineStats(**{name: getattr(row, name) for name in stats.HeadlineStats.__dataclass_fields__})


def verdict_summary(cells: Sequence[CellRow]) -> str:
    """One verdict when BS 2–8 agree, else each verdict with the batch sizes that have it."""
    by_verdict: dict[str, list[int]] = defaultdict(list)
    for cell in sorted(cells, key=lambda c: c.batch_size):
        if HEADLINE_FROM <= cell.batch_size <= HEADLINE_TO and cell.n_machines:
            by_verdict[cell.verdict_text].append(cell.batch_size)
    if len(by_verdict) <= 1:
        return next(iter(by_verdict), "too few machines")
    return "; ".join(f"{verdict} at BS{', BS'.join(map(str, sizes))}" for verdict, sizes in by_verdict.items())


@dataclass(frozen=True)
class RankLine(ChipNamed):
    chip: str
    gpu_cores: int | None
    model: str
    quant: str
    headline: LineFigure | None
    verdict: str
    curve: tuple[tuple[int, float], ...]  # (batch size, speedup) for the sparkline
    reference: bool = False  # a published row: not signed, never part of crowd medians
    source_url: str = ""
    expected: tuple[int, ...] = ()  # the campaign's batch sizes in 2–8
    model_sha256: str = ""
    backend: str = ""
    commit: str = ""  # set where the variant follows a ref: the resolved commit the line is keyed by
    control: bool = False  # a backend the patches do not touch: an A/A control, never ranked
    n_machines: int = 0  # the most machines (keys) one of its cells counts: the picker's count too
    n_pending: int = 0  # the most machines pending in one of its cells
    evidence: tuple[object, ...] = ()  # words.evidence_key of its headline: the ranking's order
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
        return "published" if self.reference else plural(self.n_machines, "machine")

    @property
    def pending(self) -> str:
        return pending_note(self.n_pending)

    @property
    def headline_machines(self) -> str:
        """Said when the headline stands on fewer machines than the line has (some missed a size)."""
        if self.reference or self.headline is None or self.headline.n_machines == self.n_machines:
            return ""
        return f"headline from the {self.headline.n_machines} of them that measured all of BS 2–8"

    @property
    def short_commit(self) -> str:
        return short_sha(self.commit)

    @property
    def control_label(self) -> str:
        return control_label(self.backend) if self.control else ""


LineKey = tuple[str, int, str, str, str]  # chip, GPU cores (0: none), model sha256, backend, commit


def rank(
    cells: Iterable[CellRow],
    headlines: Iterable[HeadlineRow],
    references: Iterable[ReferenceLike],
    variant: str,
    followers: Iterable[str] = (),
) -> list[RankLine]:
    """Crowd lines (one per chip, model file, backend and commit) and published lines (one per
    published table). Crowd lines come first in order of evidence (words.evidence_key of the
    headline), controls among them flagged; published lines, which are no evidence, after them.
    A line's machines are the most machines (keys) any one of its cells counts, as the model
    picker counts a file's. `followers` are the variants that follow a ref, whose lines say their commit."""
    cells, references = list(cells), list(references)
    stored = {
        (h.chip, h.gpu_cores or 0, h.model_sha256, h.backend, h.commit): h for h in headlines if h.variant == variant
    }
    sizes = {c.batch_size for c in cells} | {r.batch_size for r in references}
    expected = tuple(sorted(bs for bs in sizes if HEADLINE_FROM <= bs <= HEADLINE_TO))
    crowd: dict[LineKey, list[CellRow]] = defaultdict(list)
    for cell in cells:
        if cell.variant == variant:
            crowd[(cell.chip, cell.gpu_cores or 0, cell.model_sha256, cell.backend, cell.commit)].append(cell)
    names = model_names([(group[0].model, key[2]) for key, group in crowd.items()])
    follows = variant in set(followers)
    lines = []
    for key, group in crowd.items():
        chip, cores, sha256, backend, commit = key
        curve = tuple(sorted((c.batch_size, c.speedup) for c in group if c.n_machines and c.speedup is not None))
        row = stored.get(key)
        found = stored_headline(row)
        lines.append(
            RankLine(
                chip,
                cores or None,
                names[sha256],
                group[0].quant,
                found,
                verdict_label(found.verdict, group[0].min_effect) if found else verdict_summary(group),
                curve,
                expected=expected,
                model_sha256=sha256,
                backend=backend,
                commit=commit if follows else "",
                control=group[0].control,
                n_machines=max(c.n_machines for c in group),
                n_pending=max(c.n_pending for c in group),
                evidence=tuple(evidence_key(as_stats(row))) if row is not None and found else (99,),
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
            line.reference,
            line.evidence if not line.reference else (-(line.headline.speedup if line.headline else 0),),
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
