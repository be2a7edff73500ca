"""The result as a person reads it: decode t/s per variant and batch size with the site's verdict words
(`1949.0→1915.1 (-1.7%) [-3.2%, -0.2%] unclear`). The change printed is the submission's estimate the site
shows for this upload (benchhub_protocol.cycles.submission_estimate: the median over whole cycles); the
interval beside it is the one the sweep's stop judged (benchhub_protocol.rounds.judge_cell: 95% at every look
together), and the verdict is the site's rule (benchhub_protocol.stats.decide) at the campaign's min_effect."""

from __future__ import annotations

import textwrap
from typing import Any

from benchhub_protocol.rounds import (
    DEFAULT_MIN_EFFECT,
    MAX_ROUNDS,
    TARGET_SHARE_OF_MIN_EFFECT,
    disturbed_rounds,
    judge_sweep,
    max_looks,
)
from benchhub_protocol.stats import paired, verdict_label

WIDTH = 80  # the final table fits a default terminal


def _by_round(runs: list[dict[str, Any]]) -> dict[tuple[str, int], dict[int, float]]:
    """Each (variant, batch size)'s decode t/s by round."""
    found: dict[tuple[str, int], dict[int, float]] = {}
    for run in runs:
        for row in run["rows"]:
            found.setdefault((run["variant"], row["batch_size"]), {})[run["rep"]] = row["tg_tps"]
    return found


def min_effect_of(payload: dict[str, Any]) -> float:
    """The campaign's min_effect the sweep judged by (its stop record); the protocol's default otherwise."""
    stop = payload["sweep"].get("stop") or {}
    if "min_effect" in stop:
        return float(stop["min_effect"])
    if "target_half_width" in stop:
        return float(stop["target_half_width"]) / TARGET_SHARE_OF_MIN_EFFECT
    return DEFAULT_MIN_EFFECT


def cells(payload: dict[str, Any]) -> list[dict[str, Any]]:
    """Per (variant, batch size): the variant's and the baseline's median decode t/s over their paired rounds
    (benchhub_protocol.stats.paired, the numbers the site's page shows for the upload), the speedup (the
    site's estimate for this submission), both bounds of the interval, its half-width and the verdict."""
    runs = payload["sweep"]["runs"]
    by_round = _by_round(runs)
    baseline = payload["variants"][0]["name"]
    min_effect = min_effect_of(payload)
    stop = payload["sweep"].get("stop") or {}
    looks = max_looks(int(stop.get("max_rounds") or MAX_ROUNDS), len(payload["variants"]))
    verdicts = judge_sweep(runs, baseline, payload["sweep"]["batch_sizes"], min_effect, looks)
    rows = []
    for variant in payload["variants"]:
        for size in payload["sweep"]["batch_sizes"]:
            found = verdicts.get((variant["name"], size))
            numbers = paired(by_round.get((variant["name"], size), {}), by_round.get((baseline, size), {}))
            speedup = found.ratio if found else None
            rows.append(
                {
                    "variant": variant["name"],
                    "batch_size": size,
                    "n_cycles": found.estimate.n_cycles if found else 0,
                    "tg_tps": numbers.tg_tps if numbers else None,
                    "baseline_tg_tps": numbers.baseline_tg_tps if numbers else None,
                    "speedup": speedup,
                    "ci_low": found.low if found else None,
                    "ci_high": found.high if found else None,
                    "half_width": (found.high / found.low) ** 0.5 - 1 if found else None,
                    "verdict": verdict_label(found.verdict, min_effect) if found else None,
                }
            )
    return rows


def _percent(ratio: float) -> str:
    change = (ratio - 1) * 100
    return "±0.0%" if round(change, 1) == 0 else f"{change:+.1f}%"


def _bound(ratio: float) -> str:
    """An interval's end as a change; past -90% or +900% only its side, so that a cycle of wild noise still
    fits its column (one CPU run under other load reached +7,479,145,726%)."""
    if ratio > 10:
        return ">+900%"
    if ratio < 0.1:
        return "<-90%"
    return _percent(ratio)


def _interval_text(cell: dict[str, Any]) -> str:
    return f"[{_bound(cell['ci_low'])}, {_bound(cell['ci_high'])}]"


def _variant_block(name: str, baseline: str, cells_of: list[dict[str, Any]]) -> list[str]:
    """One variant against the baseline, a line per batch size, in at most 80 columns: a table wraps by
    variant, never inside a line."""
    width = max(8, len(baseline), len(name))
    lines = [
        f"{name} against {baseline}:",
        f"  {'batch':>5}  {baseline[:width]:>{width}}  {name[:width]:>{width}}  {'change':>7}  "
        f"{'interval':<17}  verdict",
    ]
    for cell in cells_of:
        base = "–" if cell["baseline_tg_tps"] is None else f"{cell['baseline_tg_tps']:.1f}"
        if cell["speedup"] is None:
            value = "missing" if cell["tg_tps"] is None else f"{cell['tg_tps']:.1f}"
            lines.append(f"  {cell['batch_size']:>5}  {base:>{width}}  {value:>{width}}  no whole cycle: no estimate")
            continue
        lines.append(
            f"  {cell['batch_size']:>5}  {base:>{width}}  {cell['tg_tps']:>{width}.1f}  "
            f"{_percent(cell['speedup']):>7}  {_interval_text(cell):<17}  {cell['verdict']}"
        )
    return lines


def disturbance_lines(payload: dict[str, Any]) -> list[str]:
    """Each run disturbed far beyond the machine's own spread, named by its round."""
    found = disturbed_rounds(payload["sweep"]["runs"], payload["sweep"]["batch_sizes"])
    return [
        f"Round {item.rep}: {item.variant} ran {abs(item.deviation) * 100:.0f}% "
        f"{'slower' if item.deviation < 0 else 'faster'} than its typical speed (this machine's own spread: "
        f"{item.spread * 100:.1f}%), disturbed; the median over cycles keeps it from moving the change much."
        for item in found
    ]


def table(payload: dict[str, Any]) -> str:
    names = [variant["name"] for variant in payload["variants"]]
    all_cells = cells(payload)
    model = payload["model"]
    machine = payload["machine"]
    sweep = payload["sweep"]
    rounds = len({run["rep"] for run in sweep["runs"]})
    n_cycles = max((cell["n_cycles"] for cell in all_cells), default=0)
    stopped = f", stopped: {sweep['stop_reason']}" if sweep.get("stop_reason") else ""
    cycles = f"{n_cycles} whole cycle{'' if n_cycles == 1 else 's'}"
    # A machine's own name can be long ("Intel(R) Xeon(R) Processor @ 2.60GHz"): the heading wraps too.
    title = [
        _wrapped(f"Decode t/s (S_TG), {model['file_name']} {model['file_type']}"),
        _wrapped(f"on {machine['chip']} ({machine['backend']}): {rounds} rounds, {cycles}{stopped}."),
        "change: the site's number (median over cycles); interval: 95% at every look;",
        f"verdict at min_effect {min_effect_of(payload) * 100:g}%.",
    ]
    body: list[str] = []
    if len(names) == 1:
        body.append(f"{names[0]} only: no change to show.")
    for name in names[1:]:
        body += ["", *_variant_block(name, names[0], [c for c in all_cells if c["variant"] == name])]
    disturbed = [_wrapped(line) for line in disturbance_lines(payload)]
    status = [_wrapped(line) for line in status_lines(payload)]
    return "\n".join([*title, *body, *(["", *disturbed] if disturbed else []), "", *status])


def _wrapped(line: str) -> str:
    """A sentence in lines of at most WIDTH columns, the later ones indented."""
    return textwrap.fill(line, WIDTH, subsequent_indent="  ", break_on_hyphens=False, break_long_words=False)


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
