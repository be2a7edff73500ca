"""The result as a person reads it: decode t/s per variant and batch size, in the seed's format
(`148.0→209.9 (+42%) ±0.8%`), where ± is the half-width of the 95% interval of the round-paired
ratio (benchhub_protocol.rounds), and each variant's correctness and output status."""

from __future__ import annotations

import statistics
from typing import Any

from benchhub_protocol.rounds import half_width, round_ratios


def _medians(runs: list[dict[str, Any]]) -> dict[tuple[str, int], float]:
    values: dict[tuple[str, int], list[float]] = {}
    for run in runs:
        for row in run["rows"]:
            values.setdefault((run["variant"], row["batch_size"]), []).append(row["tg_tps"])
    return {key: statistics.median(speeds) for key, speeds in values.items()}


def cells(payload: dict[str, Any]) -> list[dict[str, Any]]:
    """Per (variant, batch size): the baseline's median decode t/s over rounds, the speedup as the median
    of the round-paired ratios and the half-width of their 95% interval. As in docs/protocol.md, cells, a variant's
    t/s is the baseline's times the speedup, so the three numbers shown always agree."""
    runs = payload["sweep"]["runs"]
    medians = _medians(runs)
    baseline = payload["variants"][0]["name"]
    rows = []
    for variant in payload["variants"]:
        for size in payload["sweep"]["batch_sizes"]:
            ratios = round_ratios(runs, variant["name"], baseline, size)
            speedup = statistics.median(ratios) if ratios and variant["name"] != baseline else None
            base = medians.get((baseline, size))
            rows.append(
                {
                    "variant": variant["name"],
                    "batch_size": size,
                    "n_rounds": len(ratios),
                    "tg_tps": base * speedup if base and speedup else medians.get((variant["name"], size)),
                    "baseline_tg_tps": base,
                    "speedup": speedup,
                    "half_width": half_width(ratios) if speedup else None,
                }
            )
    return rows


def _cell_text(cell: dict[str, Any], is_baseline: bool) -> str:
    if cell["tg_tps"] is None:
        return "missing"
    if is_baseline or cell["speedup"] is None:
        return f"{cell['tg_tps']:.1f}"
    width = f" ±{cell['half_width'] * 100:.1f}%" if cell["half_width"] is not None else " (1 round)"
    percent = (cell["speedup"] - 1) * 100
    return f"{cell['baseline_tg_tps']:.1f}→{cell['tg_tps']:.1f} ({percent:+.0f}%){width}"


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
    rounds = len({run["rep"] for run in payload["sweep"]["runs"]})
    title = (
        f"Decode t/s (S_TG, median of {rounds} rounds; speedup = median round-paired ratio ±95% interval), "
        f"{model['file_name']} {model['file_type']} on {machine['chip']} ({machine['backend']})"
    )
    return "\n".join([title, *render, "", *status_lines(payload)])


def _generation_text(outputs: list[dict[str, Any]], baseline_outputs: list[dict[str, Any]], is_baseline: bool) -> str:
    """The degenerate-output verdict: a variant's loops say nothing about it where the baseline loops on
    the same prompt too (a low-bit quant that loops everywhere), so those prompts are inconclusive;
    byte-identity with the baseline still tells."""
    looping = {entry["prompt_id"] for entry in baseline_outputs if entry["degenerate"]}
    judged = [entry for entry in outputs if is_baseline or entry["prompt_id"] not in looping]
    degenerate = sum(entry["degenerate"] for entry in judged)
    identical = sum(entry["identical_to_baseline"] for entry in outputs)
    text = f"generation {degenerate}/{len(judged)} degenerate"
    if len(judged) < len(outputs):
        text += f", {len(outputs) - len(judged)} inconclusive (the baseline loops there too)"
    return f"{text}, {identical}/{len(outputs)} identical to baseline"


def status_lines(payload: dict[str, Any]) -> list[str]:
    lines = []
    baseline = payload["variants"][0]["name"]
    baseline_outputs = [entry for entry in payload["generation"] if entry["variant"] == baseline]
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
        lines.append(
            f"{name} at {variant['commit'][:12]}: correctness {correctness}; "
            + _generation_text(outputs, baseline_outputs, name == baseline)
        )
    lines.append("flags: " + (", ".join(payload["flags"]) if payload["flags"] else "none"))
    return lines
