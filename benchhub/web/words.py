"""The words and numbers a reader sees for a cell or a headline (docs/protocol.md section 7, cells
version 4), in one place for the pages: the verdict words, the effect and range formats, the
interval's and the prediction's labels, and the ranking's order by evidence. The rules and the verdict
words themselves are the shared package's (benchhub_protocol.stats, .words and .markdown), so the
agent, the Markdown export and the pages print the same."""

from __future__ import annotations

import math
from collections.abc import Sequence

from benchhub_protocol import markdown, stats
from benchhub_protocol import words as protocol_words
from benchhub_protocol.words import TOO_FEW, VARIES, VERDICT_MARKS, VERDICTS

from benchhub.results.campaigns import backend_name

RANGE = "range"  # the interval word for the lowest to the highest machine: no confidence claimed


def percent(fraction: float) -> str:
    """0.05 -> "5%", 0.015 -> "1.5%": a campaign's threshold as written in its manifest."""
    return f"{round(fraction * 100, 2):g}%"


verdict_label = stats.verdict_label  # "within" names its threshold: "within ±2%"
evidence_key = stats.evidence_key  # the ranking's order: what the data support, not the point estimate
ABOUT_VERDICTS: str = protocol_words.ABOUT_VERDICTS  # the About page's five sentences

format_change = markdown.format_change  # "+42%", "+0.4%" under 1%, "±0.0%" only for a change under 0.05%
format_interval = markdown.format_interval  # "+3% to +9%"; once when both ends print the same


def effect_text(speedup: float | None, verdict: str = "") -> str:
    """The effect beside its verdict: a verdict never stands beside an effect printed as zero, so a
    small effect that has one gets the digits that show it (only an exact zero prints "±0.0%")."""
    text = format_change(speedup)
    if verdict and not any(digit in text for digit in "123456789") and speedup is not None and speedup != 1.0:
        change = (speedup - 1.0) * 100
        digits = next((d for d in range(2, 9) if round(abs(change), d)), 9)
        text = f"{'+' if change > 0 else '−'}{abs(change):.{digits}f}%"
    return text


def compact_interval(interval: str | None, low: float | None, high: float | None, n_machines: int | None = None) -> str:
    """A table cell's second line: "+10…+13 · n=3", the interval's ends as changes in percent and
    the machines it stands on (left out where a column beside it counts them); a range says so
    ("range −1…+4 · n=2"). The legend under the table and the cell's tooltip (interval_note) give the
    whole wording."""
    parts = [] if n_machines is None else [f"n={n_machines}"]
    if low is not None and high is not None and interval is not None:
        ends = [format_change(value).removesuffix("%") for value in (low, high)]
        span = ends[0] if ends[0] == ends[1] else "…".join(ends)
        parts.insert(0, f"{RANGE} {span}" if interval == RANGE else span)
    return " · ".join(parts)


SHORT_VERDICTS = {VARIES: "varies", TOO_FEW: "too few"}  # in a compact cell; its tooltip says it whole


def verdict_mark(verdict: str, min_effect: float) -> str:
    """The verdict with its mark, as a compact cell shows it: "▲ faster", "≈ within ±2%", "· too few"."""
    word = SHORT_VERDICTS.get(verdict) or verdict_label(verdict, min_effect)
    return f"{VERDICT_MARKS.get(verdict, '')} {word}".strip()


def legend(min_effect: float) -> str:
    """Said once under each table of compact cells: what the parts of a cell are."""
    marks = ", ".join(f"{VERDICT_MARKS[word]} {verdict_label(word, min_effect)}" for word in VERDICTS)
    return (
        "Each cell: baseline → variant decode t/s (change). Under it, the interval for the typical machine "
        "(95%, holding for every interval of its group at once; “range”: lowest to highest machine) as changes "
        f"in %, with n machines; then the verdict: {marks}. Hover or tap a cell for the whole wording and "
        "what your Mac will likely see."
    )


def plural(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"


def is_confidence(interval: str | None) -> bool:
    """An interval that claims a confidence ("95%", "95%, page-wise"), as opposed to a range."""
    return interval is not None and interval != RANGE


def interval_note(interval: str | None, low: float | None, high: float | None, n_machines: int) -> str:
    """What the interval is, in words, with the machines it stands on: "95%, page-wise interval for
    the typical machine: +1% to +5%, 8 machines"; a range is called a range, never "95%"."""
    machines = plural(n_machines, "machine")
    if low is None or high is None or interval is None:
        return machines
    if interval == RANGE:
        return f"range of {machines}: {format_interval(low, high)}"
    return f"{interval} interval for the typical machine: {format_interval(low, high)}, {machines}"


def prediction_note(
    low: float | None, high: float | None, level: float | None, tau: float | None = None, i2: float | None = None
) -> str:
    """Where one more machine of the chip is expected to fall, with how much the machines' own changes
    differ: "what your Mac will likely see: 80% of machines +3% to +9% (machines differ by ±1.2%,
    I² 40%)"; empty when there is no prediction."""
    if low is None or high is None or not level:
        return ""
    text = f"what your Mac will likely see: {round(level * 100):g}% of machines {format_interval(low, high)}"
    spread = spread_note(tau, i2)
    return f"{text} ({spread})" if spread else text


def spread_note(tau: float | None, i2: float | None) -> str:
    """How much the machines' true changes differ (tau, a log-scale sd, printed as a percent) and the
    share of the spread seen that is theirs rather than measurement noise (I²)."""
    if tau is None or i2 is None:
        return ""
    return f"machines differ by ±{100 * math.expm1(tau):.1f}%, I² {100 * i2:.0f}%"


def pending_note(n_pending: int) -> str:
    return f"{plural(n_pending, 'machine')} pending" if n_pending else ""


def threshold_note(min_effect: float) -> str:
    """Shown once near each table: what the verdicts are measured against."""
    return (
        f"Verdicts: “faster” or “slower” is a change of at least {percent(min_effect)} that the evidence shows "
        f"and the machines agree on; “varies by machine” means some machines gain and others lose more than "
        f"{percent(min_effect)}; “within ±{percent(min_effect)}” is a change the evidence bounds inside "
        f"±{percent(min_effect)} for the typical machine and for new ones."
    )


def control_label(backend: str) -> str:
    return f"control: the patches do not touch {backend_name(backend)}"


def short_sha(sha: str, length: int = 7) -> str:
    return sha[:length]


def model_names(pairs: Sequence[tuple[str, str]]) -> dict[str, str]:
    """sha256 -> the name to show: the display name, with a short sha where two files share it."""
    by_name: dict[str, set[str]] = {}
    for name, sha256 in pairs:
        by_name.setdefault(name, set()).add(sha256)
    return {
        sha256: f"{name} · sha256 {short_sha(sha256, 8)}" if len(by_name[name]) > 1 else name for name, sha256 in pairs
    }
