"""The result as a person reads it: decode t/s per variant and batch size with the site's verdict words
(`1949.0→1915.1 (-1.7%) [-3.2%, -0.2%] unclear`). The change printed is the centre of the interval beside
it (benchhub_protocol.rounds.cell_estimate), 95% sweep-wise: Bonferroni over the sweep's cells, as the site's
intervals are page-wise. The verdict is the site's rule (benchhub_protocol.stats.decide) at the campaign's
min_effect."""

from __future__ import annotations

import statistics
from typing import Any

from benchhub_protocol.rounds import DEFAULT_MIN_EFFECT, TARGET_SHARE_OF_MIN_EFFECT, cell_estimate
from benchhub_protocol.stats import decide, verdict_label


def _medians(runs: list[dict[str, Any]]) -> dict[tuple[str, int], float]:
    values: dict[tuple[str, int], list[float]] = {}
    for run in runs:
        for row in run["rows"]:
            values.setdefault((run["variant"], row["batch_size"]), []).append(row["tg_tps"])
    return {key: statistics.median(speeds) for key, speeds in values.items()}


def min_effect_of(payload: dict[str, Any]) -> float:
    """The campaign's min_effect the sweep aimed at (its stop record); the protocol's default otherwise."""
    stop = payload["sweep"].get("stop")
    return stop["target_half_width"] / TARGET_SHARE_OF_MIN_EFFECT if stop else DEFAULT_MIN_EFFECT


def cells(payload: dict[str, Any]) -> list[dict[str, Any]]:
    """Per (variant, batch size): the baseline's median decode t/s over rounds, the speedup (the geometric
    mean of the round-paired ratios, the centre of its interval), both bounds of the 95% interval, its
    half-width and the verdict. As in docs/protocol.md (cells), a variant's t/s is the baseline's times the speedup."""
    runs = payload["sweep"]["runs"]
    medians = _medians(runs)
    baseline = payload["variants"][0]["name"]
    min_effect = min_effect_of(payload)
    # Sweep-wise, as the site's intervals are page-wise: all the sweep's intervals hold together 95% of the time.
    n_tests = (len(payload["variants"]) - 1) * len(payload["sweep"]["batch_sizes"])
    rows = []
    for variant in payload["variants"]:
        for size in payload["sweep"]["batch_sizes"]:
            found = (
                cell_estimate(runs, variant["name"], baseline, size, n_tests) if variant["name"] != baseline else None
            )
            base = medians.get((baseline, size))
            speedup = found.ratio if found else None
            rows.append(
                {
                    "variant": variant["name"],
                    "batch_size": size,
                    "n_rounds": found.n_rounds if found else 0,
                    "tg_tps": base * speedup if base and speedup else medians.get((variant["name"], size)),
                    "baseline_tg_tps": base,
                    "speedup": speedup,
                    "ci_low": found.low if found else None,
                    "ci_high": found.high if found else None,
                    "half_width": found.half_width if found else None,
                    "verdict": verdict_label(decide(found.ratio, found.low, found.high, min_effect), min_effect)
                    if found
                    else None,
                }
            )
    return rows


def _percent(ratio: float) -> str:
    change = (ratio - 1) * 100
    return "±0.0%" if round(change, 1) == 0 else f"{change:+.1f}%"


def _cell_text(cell: dict[str, Any], is_baseline: bool) -> str:
    if cell["tg_tps"] is None:
        return "missing"
    if is_baseline or cell["speedup"] is None:
        return f"{cell['tg_tps']:.1f}" + ("" if is_baseline else " (1 round)")
    return (
        f"{cell['baseline_tg_tps']:.1f}→{cell['tg_tps']:.1f} ({_percent(cell['speedup'])}) "
        f"[{_percent(cell['ci_low'])}, {_percent(cell['ci_high'])}] {cell['verdict']}"
    )


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
        f"Decode t/s (S_TG, {rounds} rounds; change = geometric mean of the round-paired ratios [95% interval], "
        f"verdict at min_effect {min_effect_of(payload) * 100:g}%), "
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
        text += f", {len(outputs) - len(judged)} not judged (the baseline is degenerate there too)"
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
