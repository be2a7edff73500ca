"""The interleaved, repeated batched-bench sweep and its statistics."""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .tools import parse_batched_bench_jsonl, run_tool

SPREAD_LIMIT = 0.01  # rep-to-rep spread above 1% of the median asks for more reps (the original study's bar)
CTX_ALIGN = 256


def context_size(npp: int, ntg: int, batch_sizes: Sequence[int]) -> int:
    """n_ctx that fits npp + ntg tokens for every sequence of the largest batch (batched-bench skips
    a cell whose need exceeds n_ctx, and an undersized batch aborts the run), divisible by the
    sequence count so llama.cpp does not round it down."""
    per_sequence = -(-(npp + ntg) // CTX_ALIGN) * CTX_ALIGN
    return max(batch_sizes) * per_sequence


def interleaved_round(variants: Sequence[str], round_index: int) -> list[str]:
    """A B C, then C B A, then A B C...: each variant runs early and late equally often, so a drift
    in clock or temperature over the sweep does not favour one of them."""
    return list(variants) if round_index % 2 == 0 else list(reversed(variants))


@dataclass(frozen=True)
class SweepSettings:
    npp: int
    ntg: int
    batch_sizes: tuple[int, ...]
    reps: int
    max_reps: int
    flash_attn: bool
    n_gpu_layers: int
    extra_args: tuple[str, ...] = ()  # campaign-specific switches (schema.SWEEP_EXTRA_ARGS)
    pinned_n_ctx: int | None = None  # a campaign that states -c (as its source did) gets exactly that

    @property
    def n_ctx(self) -> int:
        return self.pinned_n_ctx or context_size(self.npp, self.ntg, self.batch_sizes)

    def as_payload(self, runs: list[dict[str, Any]]) -> dict[str, Any]:
        return {
            "tool": "llama-batched-bench",
            "npp": self.npp,
            "ntg": self.ntg,
            "n_ctx": self.n_ctx,
            "flash_attn": self.flash_attn,
            "n_gpu_layers": self.n_gpu_layers,
            "batch_sizes": list(self.batch_sizes),
            "order": "interleaved",
            "extra_args": list(self.extra_args),
            "runs": runs,
        }


# Settings compared where the campaign states them; n_ctx only where it pins one (the agent derives it otherwise).
COMPARED_SETTINGS = ("npp", "ntg", "n_ctx", "flash_attn", "n_gpu_layers")


def sweep_differences(sweep: dict[str, Any], campaign_sweep: dict[str, Any]) -> list[str]:
    """What in a sweep's settings (PROTOCOL 4.4) differs from its campaign's, one phrase per setting; a
    subset of the campaign's batch sizes is not a difference. The service keeps such a result out of
    its cells (flag `nonstandard_sweep`); the agent says so before the run."""
    differences = [
        f"{name} {sweep.get(name)} instead of {campaign_sweep[name]}"
        for name in COMPARED_SETTINGS
        if name in campaign_sweep and sweep.get(name) != campaign_sweep[name]
    ]
    extra, wanted = sorted(sweep.get("extra_args") or []), sorted(campaign_sweep.get("extra_args") or [])
    if extra != wanted:
        differences.append(f"switches [{' '.join(extra)}] instead of [{' '.join(wanted)}]")
    outside = sorted(set(sweep["batch_sizes"]) - set(campaign_sweep.get("batch_sizes", sweep["batch_sizes"])))
    if outside:
        differences.append(f"batch sizes {', '.join(map(str, outside))} outside the campaign's")
    return differences


def batched_bench_args(binary: Path, model: Path, settings: SweepSettings) -> list[str]:
    return [
        str(binary),
        "-m", str(model),
        "-npp", str(settings.npp),
        "-ntg", str(settings.ntg),
        "-npl", ",".join(map(str, settings.batch_sizes)),
        "-c", str(settings.n_ctx),
        "-kvu",
        "-fa", "on" if settings.flash_attn else "off",
        "-ngl", str(settings.n_gpu_layers),
        *settings.extra_args,
        "--output-format", "jsonl",
    ]  # fmt: skip


def cell_values(runs: Sequence[dict[str, Any]], key: str = "tg_tps") -> dict[tuple[str, int], list[float]]:
    cells: dict[tuple[str, int], list[float]] = {}
    for run in runs:
        for row in run["rows"]:
            cells.setdefault((run["variant"], row["batch_size"]), []).append(row[key])
    return cells


def spread(values: Sequence[float]) -> float | None:
    """(max - min) / median over reps; None with fewer than two reps (nothing to compare)."""
    if len(values) < 2:
        return None
    median = statistics.median(values)
    return (max(values) - min(values)) / median if median > 0 else None


def spread_too_high(runs: Sequence[dict[str, Any]]) -> bool:
    return any((s := spread(values)) is not None and s > SPREAD_LIMIT for values in cell_values(runs).values())


def rows_missing(runs: Sequence[dict[str, Any]], batch_sizes: Sequence[int]) -> bool:
    return any(run["exit_code"] != 0 or len(run["rows"]) < len(batch_sizes) for run in runs)


def _row_reporter(
    label: str, seq: int, total_runs: int, batch_sizes: Sequence[int], report: Callable[[str, float | None], None]
) -> Callable[[str], None]:
    """Shows each batch size's decode speed as batched-bench prints it, with the sweep's share done."""

    def on_line(line: str) -> None:
        rows = parse_batched_bench_jsonl(line)
        if rows and rows[0]["batch_size"] in batch_sizes:
            done_in_run = list(batch_sizes).index(rows[0]["batch_size"]) + 1
            fraction = (seq - 1 + done_in_run / len(batch_sizes)) / total_runs
            report(f"{label}, batch {rows[0]['batch_size']}: {rows[0]['tg_tps']:.1f} t/s", fraction)

    return on_line


def run_sweep(
    variants: Sequence[tuple[str, Path, dict[str, str]]],
    model: Path,
    settings: SweepSettings,
    log_dir: Path,
    report: Callable[[str, float | None], None],
) -> tuple[list[dict[str, Any]], list[str]]:
    """Runs every variant `reps` times, interleaved; while a cell spreads more than 1% and the cap allows,
    one more interleaved round. Returns the runs (PROTOCOL 4.4) and the sweep's flags."""
    names = [name for name, _, _ in variants]
    by_name = {name: (bin_dir, env) for name, bin_dir, env in variants}
    runs: list[dict[str, Any]] = []
    round_index = 0
    while True:
        for name in interleaved_round(names, round_index):
            bin_dir, env = by_name[name]
            rep = round_index + 1
            seq = len(runs) + 1
            planned = settings.reps * len(names)
            label = f"{name} rep {rep} (run {seq} of {max(planned, seq)})"
            report(label, (seq - 1) / max(planned, seq))

            args = batched_bench_args(bin_dir / "llama-batched-bench", model, settings)
            done = run_tool(
                args,
                log_dir / f"batched-bench-{seq:03d}-{name}-rep{rep}",
                env=env,
                on_line=_row_reporter(label, seq, max(planned, seq), settings.batch_sizes, report),
            )
            rows = [row for row in parse_batched_bench_jsonl(done.stdout) if row["batch_size"] in settings.batch_sizes]
            runs.append({"variant": name, "rep": rep, "seq": seq, "exit_code": done.exit_code, "rows": rows})
        round_index += 1
        if round_index >= settings.max_reps or (round_index >= settings.reps and not spread_too_high(runs)):
            break
    flags = []
    if spread_too_high(runs):
        flags.append("high_spread")
    if rows_missing(runs, settings.batch_sizes):
        flags.append("sweep_row_missing")
    return runs, flags
