"""The result as a person reads it: decode t/s per variant and batch size, in the seed's format
(`148.0→209.9 (+42%)`), with the rep-to-rep spread, and each variant's correctness and output status."""

from __future__ import annotations

import statistics
from typing import Any

from .sweep import cell_values, spread


def cells(payload: dict[str, Any]) -> list[dict[str, Any]]:
    """Per (variant, batch size): median decode t/s over reps, its spread, and the paired ratio to the
    baseline's median at that batch size (the baseline is the first variant)."""
    values = cell_values(payload["sweep"]["runs"])
    baseline = payload["variants"][0]["name"]
    rows = []
    for variant in payload["variants"]:
        for size in payload["sweep"]["batch_sizes"]:
            reps = values.get((variant["name"], size), [])
            base = values.get((baseline, size), [])
            median = statistics.median(reps) if reps else None
            base_median = statistics.median(base) if base else None
            rows.append(
                {
                    "variant": variant["name"],
                    "batch_size": size,
                    "n_reps": len(reps),
                    "tg_tps": median,
                    "baseline_tg_tps": base_median,
                    "speedup": median / base_median if median and base_median else None,
                    "spread": spread(reps),
                }
            )
    return rows


def _cell_text(cell: dict[str, Any], is_baseline: bool) -> str:
    if cell["tg_tps"] is None:
        return "missing"
    spread_text = f" ±{cell['spread'] * 100:.1f}%" if cell["spread"] is not None else ""
    if is_baseline or cell["baseline_tg_tps"] is None:
        return f"{cell['tg_tps']:.1f}{spread_text}"
    percent = (cell["speedup"] - 1) * 100
    return f"{cell['baseline_tg_tps']:.1f}→{cell['tg_tps']:.1f} ({percent:+.0f}%){spread_text}"


def table(payload: dict[str, Any]) -> str:
    names = [variant["name"] for variant in payload["variants"]]
    by_key = {(cell["variant"], cell["batch_size"]): cell for cell in cells(payload)}
    header = ["batch", *names]
    lines = [
        [str(size), *(_cell_text(by_key[(name, size)], name == names[0]) for name in names)]
        for size in payload["sweep"]["batch_sizes"]
    ]
    widths = [max(len(row[i]) for row in [header, *lines]) for i in range(len(header))]
    render = [
        "  ".join(text.ljust(width) for text, width in zip(row, widths, strict=True)).rstrip()
        for row in [header, *lines]
    ]
    model = payload["model"]
    machine = payload["machine"]
    title = (
        f"Decode t/s (S_TG, median of reps; ±spread), {model['file_name']} {model['file_type']} on "
        f"{machine['chip']} ({machine['backend']})"
    )
    return "\n".join([title, *render, "", *status_lines(payload)])


def status_lines(payload: dict[str, Any]) -> list[str]:
    lines = []
    for variant in payload["variants"]:
        name = variant["name"]
        checks = [entry for entry in payload["correctness"] if entry["variant"] == name]
        correctness = (
            ", ".join(
                f"{c['status']} ({c['passed']} passed, {c['failed']} failed on {c['backend']})"
                + (f": {c['reason']}" if c.get("reason") else "")
                for c in checks
            )
            or "not run"
        )
        outputs = [entry for entry in payload["generation"] if entry["variant"] == name]
        degenerate = sum(entry["degenerate"] for entry in outputs)
        identical = sum(entry["identical_to_baseline"] for entry in outputs)
        lines.append(
            f"{name} at {variant['commit'][:12]}: correctness {correctness}; "
            f"generation {degenerate}/{len(outputs)} degenerate, {identical}/{len(outputs)} identical to baseline"
        )
    lines.append("flags: " + (", ".join(payload["flags"]) if payload["flags"] else "none"))
    return lines
