"""The interleaved batched-bench sweep: balanced blocks of rounds until the median cell is precise enough.

How precise a cell is comes from benchhub_protocol.rounds (the rule the server applies to the same payload); what
a run is worth, from what it printed: the warm-up pass is dropped, and a device run must show that the
model went to the device.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchhub_protocol.rounds import MAX_ROUNDS, MIN_ROUNDS, high_spread, sweep_differences, target_reached

from .tools import check_offload, parse_batched_bench_jsonl, run_tool

CTX_ALIGN = 256
DEFAULT_MAX_ROUNDS = MAX_ROUNDS  # the protocol's cap; the time budget usually ends a noisy sweep first
DEFAULT_MAX_SECONDS = 15 * 60  # of sweep, where the campaign states no `max_seconds`: no block starts past it
# Batch sizes run once before the measured pass and dropped: on an H200 the first two rows of a process ran
# 6.5% and 18% slow, the later ones within 1% (tests/agent/fixtures/aa-h200), so a full warm-up pass
# would only cost time.
WARMUP_SIZES = 2
# llama.cpp prints its library's INFO lines (where `offloaded N/M layers to GPU` is) from verbosity 4 on.
LOG_VERBOSITY = ("-lv", "4")


def context_size(npp: int, ntg: int, batch_sizes: Sequence[int]) -> int:
    """n_ctx that fits npp + ntg tokens for every sequence of the largest batch (batched-bench skips
    a cell whose need exceeds n_ctx, and an undersized batch aborts the run), divisible by the
    sequence count so llama.cpp does not round it down."""
    per_sequence = -(-(npp + ntg) // CTX_ALIGN) * CTX_ALIGN
    return max(batch_sizes) * per_sequence


def interleaved_round(variants: Sequence[str], round_index: int) -> list[str]:
    """Rotations, then the rotations of the mirror: A B C, B C A, C A B, C B A, B A C, A C B. Every block of
    len(variants) rounds runs each variant once in each position (a slow second process cannot favour one
    variant), and every two blocks run each one before and after each other one (nor can a drift)."""
    k = len(variants)
    block, shift = divmod(round_index, k)
    order = list(variants) if block % 2 == 0 else list(reversed(variants))
    return order[shift:] + order[:shift]


def block_length(n_variants: int) -> int:
    """Rounds per balanced block; stopping is decided only at a block's end."""
    return max(n_variants, MIN_ROUNDS)


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
    max_seconds: float = DEFAULT_MAX_SECONDS
    target: float = 0.01  # half-width the median cell aims for (benchhub_protocol.rounds.target_half_width)

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
            "warmup_batch_sizes": list(self.warmup_sizes),
            "runs": runs,
        }

    @property
    def warmup_sizes(self) -> tuple[int, ...]:
        return self.batch_sizes[:WARMUP_SIZES]

    def stop_payload(self, reason: str, seconds: float) -> dict[str, Any]:
        """The stopping settings and why the sweep ended (docs/protocol.md section 4, `stop`)."""
        return {
            "target_half_width": self.target,
            "min_rounds": self.reps,
            "max_rounds": self.max_reps,
            "max_seconds": self.max_seconds,
            "reason": reason,
            "seconds": round(seconds, 1),
        }


def planned_differences(settings: SweepSettings, campaign_sweep: dict[str, Any]) -> list[str]:
    """sweep_differences of the sweep these settings will run, said before it runs."""
    planned = [{"rep": rep} for rep in range(1, settings.reps + 1)]
    return sweep_differences({**settings.as_payload([]), "runs": planned}, campaign_sweep)


def batched_bench_args(binary: Path, model: Path, settings: SweepSettings) -> list[str]:
    # The first WARMUP_SIZES batch sizes, then the whole list: the warm-up rows are dropped.
    sizes = ",".join(map(str, settings.batch_sizes))
    warmup = ",".join(map(str, settings.warmup_sizes))
    return [
        str(binary),
        "-m", str(model),
        "-npp", str(settings.npp),
        "-ntg", str(settings.ntg),
        "-npl", f"{warmup},{sizes}",
        "-c", str(settings.n_ctx),
        "-kvu",
        "-fa", "on" if settings.flash_attn else "off",
        "-ngl", str(settings.n_gpu_layers),
        *settings.extra_args,
        *LOG_VERBOSITY,
        "--output-format", "jsonl",
    ]  # fmt: skip


def measured_rows(
    rows: Sequence[dict[str, Any]], batch_sizes: Sequence[int], warmup: Sequence[int] = ()
) -> list[dict[str, Any]]:
    """The rows of the measured pass: what follows the warm-up rows, one per batch size. A run that
    aborted in its warm-up measured nothing."""
    kept: list[dict[str, Any]] = []
    for row in rows[len(warmup) :]:
        if row["batch_size"] in batch_sizes and all(row["batch_size"] != done["batch_size"] for done in kept):
            kept.append(row)
    return kept


def rows_missing(runs: Sequence[dict[str, Any]], batch_sizes: Sequence[int]) -> bool:
    return any(run["exit_code"] != 0 or len(run["rows"]) < len(batch_sizes) for run in runs)


def precise_enough(runs: list[dict[str, Any]], batch_sizes: Sequence[int], baseline: str, target: float) -> bool:
    return target_reached({"runs": runs, "batch_sizes": list(batch_sizes)}, baseline, target)


def _row_reporter(
    label: str,
    fraction_at: Callable[[float], float],
    n_rows: int,
    n_warmup: int,
    report: Callable[[str, float | None], None],
) -> Callable[[str], None]:
    """Shows each row's decode speed as batched-bench prints it, warm-up rows marked, with the share done."""
    printed = 0

    def on_line(line: str) -> None:
        nonlocal printed
        rows = parse_batched_bench_jsonl(line)
        if rows:
            printed += 1
            stage = "warm-up, " if printed <= n_warmup else ""
            detail = f"{label}, {stage}batch {rows[0]['batch_size']}: {rows[0]['tg_tps']:.1f} t/s"
            report(detail, fraction_at(printed / n_rows))

    return on_line


@dataclass
class _Round:
    """What one round of the sweep needs to run and report itself."""

    variants: dict[str, tuple[Path, dict[str, str]]]
    model: Path
    settings: SweepSettings
    log_dir: Path
    report: Callable[[str, float | None], None]
    require_offload: str | None

    def run(self, name: str, rep: int, seq: int, planned: int, more: str = "") -> dict[str, Any]:
        bin_dir, env = self.variants[name]
        label = f"{name} round {rep} (run {seq} of {planned}{more})"
        self.report(label, (seq - 1) / planned)
        done = run_tool(
            batched_bench_args(bin_dir / "llama-batched-bench", self.model, self.settings),
            self.log_dir / f"batched-bench-{seq:03d}-{name}-rep{rep}",
            env=env,
            on_line=_row_reporter(
                label,
                lambda done: (seq - 1 + done) / planned,
                len(self.settings.warmup_sizes) + len(self.settings.batch_sizes),
                len(self.settings.warmup_sizes),
                self.report,
            ),
        )
        if self.require_offload:
            check_offload(done.stderr, self.require_offload, name, self.settings.n_gpu_layers)
        rows = measured_rows(
            parse_batched_bench_jsonl(done.stdout), self.settings.batch_sizes, self.settings.warmup_sizes
        )
        return {"variant": name, "rep": rep, "seq": seq, "exit_code": done.exit_code, "rows": rows}


def run_sweep(
    variants: Sequence[tuple[str, Path, dict[str, str]]],
    model: Path,
    settings: SweepSettings,
    log_dir: Path,
    report: Callable[[str, float | None], None],
    sample_state: Callable[[], dict[str, Any]] | None = None,
    require_offload: str | None = None,
) -> tuple[list[dict[str, Any]], list[str], list[dict[str, Any]], dict[str, Any]]:
    """Balanced blocks of rounds (interleaved_round), at least `reps` rounds; then more blocks until the
    median cell's 95% interval is within ±settings.target (benchhub_protocol.rounds), or the cap on rounds
    or time comes first, which `target_not_reached` then says. The first variant is the baseline.
    `sample_state` reads the machine's run state before every round; `require_offload` (a device backend's
    name) stops the sweep when a run's log shows the model was not offloaded to it.

    Returns the runs (docs/protocol.md section 4), the sweep's flags, the run-state samples and the `stop` record."""
    names = [name for name, _, _ in variants]
    rounds = _Round(
        {name: (bin_dir, env) for name, bin_dir, env in variants}, model, settings, log_dir, report, require_offload
    )
    runs: list[dict[str, Any]] = []
    states: list[dict[str, Any]] = []
    started = time.monotonic()
    block = block_length(len(names))
    # One round alone is allowed (a quick look) but is not standard; otherwise whole blocks.
    minimum = settings.reps if settings.reps < MIN_ROUNDS else -(-settings.reps // block) * block
    cap = max(minimum, settings.max_reps - settings.max_reps % block)
    round_index = 0
    reason = "minimum"
    while True:
        if sample_state:
            states.append(sample_state())
        # Planned so far: through the end of this block (whether another follows is not known yet).
        block_end = round_index + block - round_index % block
        planned = (minimum if minimum < MIN_ROUNDS else max(minimum, block_end)) * len(names)
        # The ETA covers the planned runs; more blocks may follow until the target, the cap or the budget.
        left = settings.max_seconds - (time.monotonic() - started)
        more = f"; up to {max(0, cap - block_end)} more rounds, {left / 60:.0f} min at most" if block_end < cap else ""
        for name in interleaved_round(names, round_index):
            runs.append(rounds.run(name, round_index + 1, len(runs) + 1, planned, more))
        round_index += 1
        if round_index < minimum:
            continue
        if minimum < MIN_ROUNDS:
            break
        if round_index % block:
            continue
        elapsed = time.monotonic() - started
        block_seconds = elapsed / (round_index / block)
        if precise_enough(runs, settings.batch_sizes, names[0], settings.target):
            reason = "target"
        elif round_index >= cap:
            reason = "rounds"
        elif elapsed + block_seconds > settings.max_seconds:
            reason = "time"
        else:
            continue
        break
    flags = []
    sweep = {"runs": runs, "batch_sizes": list(settings.batch_sizes)}
    if minimum >= MIN_ROUNDS and reason != "target":
        flags.append("target_not_reached")
    if high_spread(sweep, names[0]):
        flags.append("high_spread")
    if rows_missing(runs, settings.batch_sizes):
        flags.append("sweep_row_missing")
    return runs, flags, states, settings.stop_payload(reason, time.monotonic() - started)
