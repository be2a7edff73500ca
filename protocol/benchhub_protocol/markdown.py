"""Results as a GitHub Markdown table, the form patch authors paste into pull requests:
`148.0→209.9 (+42%)` per batch size, with the number of machines, what the interval is, and a
permalink. Pure: the agent prints it after a run and the site offers the same text to copy."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Cell:
    """One batch size of one line: decode t/s of the baseline and of the variant."""

    batch_size: int
    baseline_tg_tps: float | None
    tg_tps: float | None
    speedup: float | None = None  # when None, tg_tps / baseline_tg_tps
    n_machines: int = 1
    interval: str | None = None  # what the interval is in words ("95%, page-wise", "range") or None, as cells say
    text: str = ""  # the cell as the site writes it, verdict included ("148.0→209.9 (+42%) faster"); "": format_pair


@dataclass(frozen=True)
class Line:
    label: str  # the first column, e.g. "Apple M5 Pro (20-core GPU), 01"
    cells: Sequence[Cell]


def format_tps(value: float | None) -> str:
    """One decimal: decode t/s are measured to a tenth."""
    return "–" if value is None else f"{value:.1f}"


def _percent_text(percent: float, decimals: int) -> str:
    """A signed percentage at `decimals` places, rounded half away from zero; zero is "±0" and
    never "-0", and the sign is the rounded value's."""
    scale = 10**decimals
    rounded = math.floor(abs(percent) * scale + 0.5) / scale
    sign = "±" if rounded == 0 else ("+" if percent > 0 else "−")
    return f"{sign}{rounded:.{decimals}f}%"


def _decimals(speedup: float) -> int:
    """Effects under 1% print with one decimal, larger ones as whole percents."""
    percent = (speedup - 1.0) * 100
    return 1 if math.floor(abs(percent) * 10 + 0.5) / 10 < 1 else 0


def format_change(speedup: float | None) -> str:
    """The change a ratio means: "+42%", "−3%", "+0.3%", "±0.0%" (only a change under 0.05% prints
    as zero, and no verdict stands beside one: a verdict needs at least stats.EFFECT_FLOOR)."""
    if speedup is None:
        return "–"
    return _percent_text((speedup - 1.0) * 100, _decimals(speedup))


def format_interval(low: float | None, high: float | None) -> str:
    """An interval of ratios as changes, "+1.2% to +5.0%": both ends at the precision of the finer,
    and once when they print the same ("+37%")."""
    if low is None or high is None:
        return "–"
    decimals = max(_decimals(low), _decimals(high))
    low_text, high_text = _percent_text((low - 1.0) * 100, decimals), _percent_text((high - 1.0) * 100, decimals)
    return low_text if low_text == high_text else f"{low_text} to {high_text}"


def format_pair(baseline: float | None, value: float | None, speedup: float | None) -> str:
    """`148.0→209.9 (+42%)`; the change is the speedup given, which for a median over machines is
    not always the ratio of the two medians shown."""
    if speedup is None and baseline and value is not None:
        speedup = value / baseline
    return f"{format_tps(baseline)}→{format_tps(value)} ({format_change(speedup)})"


def lines_of_run(cells: Iterable[Mapping[str, Any]], baseline: str) -> list[Line]:
    """One line per variant of one machine's run, from rows shaped as report.cells() gives them
    (variant, batch_size, tg_tps, baseline_tg_tps, speedup, ci_low, ci_high, verdict); the baseline is left
    out. Each cell carries its interval and verdict beside the change ("148.0→209.9 (+42%) [+38% to +45%]
    faster"); a row without an interval shows the speeds and no change."""
    by_variant: dict[str, list[Cell]] = {}
    for row in cells:
        if row["variant"] != baseline and row["tg_tps"] is not None:
            pair = format_pair(row["baseline_tg_tps"], row["tg_tps"], row["speedup"])
            if row.get("ci_low") is None or row.get("verdict") is None:
                # No interval, no change: a speed-up is never printed without its interval and verdict.
                text = f"{format_tps(row['baseline_tg_tps'])}→{format_tps(row['tg_tps'])} (no whole cycle)"
                interval = None
            else:
                low, high = row["ci_low"], row["ci_high"]
                # Past -90% or +900%, only the side: wild noise still makes a readable cell.
                if low >= 0.1 and high <= 10:
                    bounds = format_interval(low, high)
                else:
                    low_text = "<−90%" if low < 0.1 else format_change(low)
                    bounds = f"{low_text} to {'>+900%' if high > 10 else format_change(high)}"
                text = f"{pair} [{bounds}] {row['verdict']}"
                interval = "95%, every look"
            cell = Cell(row["batch_size"], row["baseline_tg_tps"], row["tg_tps"], row["speedup"], 1, interval, text)
            by_variant.setdefault(row["variant"], []).append(cell)
    return [Line(name, found) for name, found in by_variant.items()]


def _machines(cells: Sequence[Cell]) -> str:
    counts = sorted({cell.n_machines for cell in cells})
    if not counts:
        return "–"
    span = str(counts[0]) if len(counts) == 1 else f"{counts[0]}–{counts[-1]}"
    return f"{span} machine{'' if counts == [1] else 's'}"


def _interval(cells: Sequence[Cell]) -> str:
    """What the interval is, in the cells' own words ("95%, page-wise interval"), a range called a range."""
    words = [f"{name} interval" for name in sorted({c.interval for c in cells if c.interval not in (None, "range")})]
    ranges = [cell for cell in cells if cell.interval == "range"]
    if ranges:
        words.append(f"range of {_machines(ranges)}")
    without = [cell for cell in cells if cell.interval is None]
    if without:
        words.append(f"none ({_machines(without)})")
    return " / ".join(words) or "–"


# The characters that open links, images, HTML, entities, code, emphasis and table cells,
# backslash-escaped: a label is contributor text, shown as written and never as a link or an image
# ("_" stays: within a word, as in Q4_K_M, it opens nothing). "://" and "www." are broken too, so
# GitHub does not make a bare URL a link.
_MARKUP = str.maketrans({char: "\\" + char for char in "\\`*[]<>|~&"})


def _escape(text: str) -> str:
    escaped = " ".join(text.splitlines()).translate(_MARKUP)
    return escaped.replace("://", ":\\/\\/").replace("www.", "www\\.")


def _value(cell: Cell) -> str:
    return cell.text or format_pair(cell.baseline_tg_tps, cell.tg_tps, cell.speedup)


def table(lines: Sequence[Line], *, title: str, permalink: str, note: str = "") -> str:
    """A bold title, a table with one column per batch size any line has, a note (e.g. what the
    verdicts are measured against) and the permalink."""
    batch_sizes = sorted({cell.batch_size for line in lines for cell in line.cells})
    header = ["", "machines", "interval", *(f"BS{size}" for size in batch_sizes)]
    out = [
        f"**{_escape(title)}** (decode t/s, baseline→variant)",
        "",
        "| " + " | ".join(header) + " |",
        "|---|---|---|" + "---:|" * len(batch_sizes),
    ]
    for line in lines:
        by_size = {cell.batch_size: cell for cell in line.cells}
        values = [_value(cell) if (cell := by_size.get(size)) else "" for size in batch_sizes]
        row = [_escape(line.label), _machines(line.cells), _interval(line.cells), *values]
        out.append("| " + " | ".join(row) + " |")
    out += ["", *([_escape(note), ""] if note else []), f"Source: <{permalink}>", ""]
    return "\n".join(out)
