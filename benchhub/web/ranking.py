"""The leaderboard's first table: one line per chip, model file, backend and variant commit, with
the headline figure, the geometric-mean speedup over the speculative-decoding batch sizes 2–8
(about.html defines it), ordered by evidence (words.evidence_key), never by the point estimate.
Lines measured on a backend the patches do not touch are controls, kept apart. Pure functions over
board.CellRow, board.HeadlineRow and published rows, like leaderboard.py."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from statistics import geometric_mean

from benchhub_protocol.stats import Judged
from benchhub_protocol.words import DIRECTIONAL, TOO_FEW, headline_sizes, in_headline
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

from benchhub.results.board import CellRow, HeadlineRow
from benchhub.web.leaderboard import ChipNamed, ReferenceLike, chip_sort_key
from benchhub.web.words import (
    compact_interval,
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


@dataclass(frozen=True)
class ShownHeadline:
    """A headline as a ranking line shows it: the stored row (board.HeadlineRow) in words. For
    crowd lines the typical machine's figure over each machine's geometric mean, with its interval;
    for published lines the geometric mean of the published speedups, with none."""

    row: HeadlineRow

    @property
    def speedup(self) -> float:
        return self.row.speedup or 1.0  # a headline without a figure is never shown

    @property
    def interval(self) -> str | None:
        return self.row.interval

    @property
    def batch_sizes(self) -> tuple[int, ...]:
        return self.row.batch_sizes

    @property
    def n_machines(self) -> int:
        return self.row.n_machines

    @property
    def text(self) -> str:
        return effect_text(self.row.speedup, self.row.verdict)

    @property
    def established(self) -> bool:
        """Only a "faster" or "slower" verdict presents the change as shown (in bold)."""
        return self.row.verdict in DIRECTIONAL

    @property
    def note(self) -> str:
        return interval_note(self.row.interval, self.row.ci_low, self.row.ci_high, self.row.n_machines)

    @property
    def prediction(self) -> str:
        row = self.row
        return prediction_note(row.predict_low, row.predict_high, row.predict_level, row.tau, row.i2)

    @property
    def compact(self) -> str:
        """Under the figure: its interval as changes in % ("+10…+13"); the machines column counts them."""
        return compact_interval(self.row.interval, self.row.ci_low, self.row.ci_high)

    @property
    def full(self) -> str:
        """The whole wording, one sentence a line: the figure's tooltip."""
        return "\n".join(sentence for sentence in (self.note, self.prediction) if sentence)


def headline(points: Iterable[tuple[int, float]]) -> ShownHeadline | None:
    """A published line's headline: the geometric mean of its speedups at BS 2–8 (no interval)."""
    used = sorted((bs, value) for bs, value in points if in_headline(bs))
    if not used:
        return None
    figure = geometric_mean(value for _, value in used)
    judged = vars(Judged.point(figure, verdict=""))
    sizes = tuple(bs for bs, _ in used)
    return ShownHeadline(
        HeadlineRow(**judged, n_machines=0, chip="", gpu_cores=None, model_sha256="", variant="", batch_sizes=sizes)
    )


def shown_headline(row: HeadlineRow | None) -> ShownHeadline | None:
    return None if row is None or row.speedup is None else ShownHeadline(row)


def verdict_summary(cells: Sequence[CellRow]) -> str:
    """One verdict when BS 2–8 agree, else each verdict with the batch sizes that have it."""
    by_verdict: dict[str, list[int]] = defaultdict(list)
    for cell in sorted(cells, key=lambda c: c.batch_size):
        if in_headline(cell.batch_size) and cell.n_machines:
            by_verdict[cell.verdict_text].append(cell.batch_size)
    if len(by_verdict) <= 1:
        return next(iter(by_verdict), TOO_FEW)
    return "; ".join(f"{verdict} at BS{', BS'.join(map(str, sizes))}" for verdict, sizes in by_verdict.items())


@dataclass(frozen=True)
class RankLine(ChipNamed):
    chip: str
    gpu_cores: int | None
    model: str
    quant: str
    headline: ShownHeadline | None
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
    expected = tuple(headline_sizes(sizes))
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
        found = shown_headline(row)
        lines.append(
            RankLine(
                chip,
                cores or None,
                names[sha256],
                group[0].quant,
                found,
                verdict_label(found.row.verdict, group[0].min_effect) if found else verdict_summary(group),
                curve,
                expected=expected,
                model_sha256=sha256,
                backend=backend,
                commit=commit if follows else "",
                control=group[0].control,
                n_machines=max(c.n_machines for c in group),
                n_pending=max(c.n_pending for c in group),
                evidence=tuple(evidence_key(row)) if row is not None and found else (99,),
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

    band = [column[bs] for bs in batch_sizes if in_headline(bs)]
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
