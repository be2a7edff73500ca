"""The interleaved batched-bench sweep: whole rotation cycles, in a random order per cycle, until every cell's
verdict is settled at the campaign's min_effect, or the time budget or the round cap comes first.

The rule (when a cell is settled, the order of a cycle) is benchhub_protocol.rounds, which the simulation in
bench/stopping.py imports too; the number printed per cell is benchhub_protocol.cycles.submission_estimate, the
one the site shows. What a run is worth comes from what it printed: the warm-up pass is dropped, and a device
run must show that the model went to the device.
"""

from __future__ import annotations

import math
import secrets
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchhub_protocol.rounds import (
    DEFAULT_MAX_SECONDS,
    DEFAULT_MIN_EFFECT,
    MAX_ROUNDS,
    MIN_ROUNDS,
    cycle_orders,
    cycles_to_settle,
    high_spread,
    judge_sweep,
    stop_reason,
    sweep_differences,
)

from .tools import check_offload, parse_batched_bench_jsonl, run_tool

CTX_ALIGN = 256
DEFAULT_MAX_ROUNDS = MAX_ROUNDS  # the protocol's cap; the time budget usually ends a noisy sweep first
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
    min_effect: float = DEFAULT_MIN_EFFECT  # the campaign's: a cell is settled when its interval clears it
    order_seed: int | None = None  # None: a fresh random seed per sweep, recorded in the payload

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

    def stop_payload(self, reason: str, seconds: float, seed: int) -> dict[str, Any]:
        """Why the sweep ended and the seed of its order (docs/protocol.md 4.4, `stop_reason`, `order_seed`),
        and the stopping settings (`stop`)."""
        return {
            "stop_reason": reason,
            "order_seed": seed,
            "stop": {
                "min_effect": self.min_effect,
                "min_rounds": self.reps,
                "max_rounds": self.max_reps,
                "max_seconds": self.max_seconds,
                "reason": reason,
                "seconds": round(seconds, 1),
            },
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


def _row_reporter(
    label: str, eta: str, n_warmup: int, report: Callable[[str, float | None], None]
) -> Callable[[str], None]:
    """Shows each row's decode speed as batched-bench prints it, warm-up rows marked."""
    printed = 0

    def on_line(line: str) -> None:
        nonlocal printed
        rows = parse_batched_bench_jsonl(line)
        if rows:
            printed += 1
            stage = "warm-up " if printed <= n_warmup else ""
            report(f"{label}, {stage}batch {rows[0]['batch_size']}: {rows[0]['tg_tps']:.1f} t/s, {eta}", None)

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

    def run(self, name: str, rep: int, seq: int, where: str, eta: str) -> dict[str, Any]:
        bin_dir, env = self.variants[name]
        self.report(f"{where}, {eta}", None)
        done = run_tool(
            batched_bench_args(bin_dir / "llama-batched-bench", self.model, self.settings),
            self.log_dir / f"batched-bench-{seq:03d}-{name}-rep{rep}",
            env=env,
            on_line=_row_reporter(where, eta, len(self.settings.warmup_sizes), self.report),
        )
        if self.require_offload:
            check_offload(done.stderr, self.require_offload, name, self.settings.n_gpu_layers)
        rows = measured_rows(
            parse_batched_bench_jsonl(done.stdout), self.settings.batch_sizes, self.settings.warmup_sizes
        )
        return {"variant": name, "rep": rep, "seq": seq, "exit_code": done.exit_code, "rows": rows}


def _minutes(seconds: float) -> str:
    return f"{max(0.0, seconds) / 60:.0f}" if seconds >= 90 else f"{max(0.0, seconds) / 60:.1f}"


def expected_cycles(
    runs: Sequence[dict[str, Any]], baseline: str, settings: SweepSettings, k: int, cap_cycles: int
) -> tuple[int, int]:
    """The cycles the rule is expected to need in all: the slowest cell's first settled look
    (rounds.cycles_to_settle) at its spread as measured and at 1.5 times it, at most the cap."""
    verdicts = judge_sweep(runs, baseline, settings.batch_sizes, settings.min_effect, cap_cycles)
    low = high = 1
    for found in verdicts.values():
        if found is None or found.spread is None:
            return cap_cycles, cap_cycles
        centre = math.log(found.ratio)
        fast = cycles_to_settle(found.spread, centre, k, settings.min_effect, cap_cycles) or cap_cycles
        slow = cycles_to_settle(1.5 * found.spread, centre, k, settings.min_effect, cap_cycles) or cap_cycles
        low, high = max(low, fast), max(high, slow)
    return low, high


def eta_text(
    done_cycles: int,
    expected: tuple[int, int] | None,
    cycle_seconds: float | None,
    left: float,
    cycle_rest: float | None = None,
) -> str:
    """The ETA of the whole expected sweep, a range. A cycle once started always ends, so it is never below
    `cycle_rest` (the seconds the current cycle still needs, at its processes' pace so far), and beyond that
    never past the time left in the budget (no further cycle starts past it)."""
    rest = cycle_rest or 0.0
    if expected is None or cycle_seconds is None:
        if cycle_rest is None:
            return f"ETA up to {_minutes(max(left, 0.0))} min"
        low, high = rest, max(rest, left)
    else:
        low, high = (rest + max(0, n - done_cycles - 1) * cycle_seconds for n in expected)
        low, high = min(low, max(rest, left)), min(high, max(rest, left))
    if high - low < 30:
        return f"ETA {_minutes(high)} min"
    return f"ETA {_minutes(low)}-{_minutes(high)} min"


def run_sweep(
    variants: Sequence[tuple[str, Path, dict[str, str]]],
    model: Path,
    settings: SweepSettings,
    log_dir: Path,
    report: Callable[[str, float | None], None],
    sample_state: Callable[[], dict[str, Any]] | None = None,
    require_offload: str | None = None,
) -> tuple[list[dict[str, Any]], list[str], list[dict[str, Any]], dict[str, Any]]:
    """Whole cycles (rounds.cycle_orders, one seed for the sweep), at least ceil(reps / k) of them; after each,
    stop when every cell is settled at settings.min_effect (rounds.judge_sweep: "settled"), when the cap on
    rounds leaves no room for another cycle ("rounds") or when another cycle would end past the time budget
    ("time"). One round alone (reps 1: a quick look, never standard) stops after that round. The first variant
    is the baseline. `sample_state` reads the machine's run state before every round; `require_offload` (a
    device backend's name) stops the sweep when a run's log shows the model was not offloaded to it.

    Returns the runs (docs/protocol.md section 4), the sweep's flags, the run-state samples and the payload's
    stop fields (stop_reason, order_seed, stop)."""
    names = [name for name, _, _ in variants]
    k = len(names)
    rounds = _Round(
        {name: (bin_dir, env) for name, bin_dir, env in variants}, model, settings, log_dir, report, require_offload
    )
    seed = settings.order_seed if settings.order_seed is not None else secrets.randbelow(2**31)
    runs: list[dict[str, Any]] = []
    states: list[dict[str, Any]] = []
    started = time.monotonic()
    quick = settings.reps < MIN_ROUNDS
    min_cycles = max(1, -(-settings.reps // k))
    cap_cycles = max(min_cycles, settings.max_reps // k)
    expected: tuple[int, int] | None = None
    cycle_seconds: float | None = None
    cycle = 0
    reason = "rounds"
    while True:
        cycle_started = time.monotonic()
        for index, order in enumerate(cycle_orders(names, seed, cycle)):
            if sample_state:
                states.append(sample_state())
            rep = cycle * k + index + 1
            for position, name in enumerate(order):
                now = time.monotonic()
                left = settings.max_seconds - (now - started)
                done_here = index * k + position  # processes of this cycle already run
                if done_here:
                    pace: float | None = (now - cycle_started) / done_here
                else:
                    pace = cycle_seconds / (k * k) if cycle_seconds else None
                cycle_rest = (k * k - done_here) * pace if pace is not None else None
                eta = eta_text(cycle, expected, cycle_seconds, left, cycle_rest)
                # The round and the variant first: a narrow terminal cuts the middle of the line.
                where = f"round {rep} of at most {cap_cycles * k} (cycle {cycle + 1}), {name}"
                runs.append(rounds.run(name, rep, len(runs) + 1, where, eta))
            if quick:
                break
        cycle += 1
        if quick:
            break
        elapsed = time.monotonic() - started
        cycle_seconds = elapsed / cycle
        if cycle < min_cycles:
            continue
        found = stop_reason(
            runs, names[0], settings.batch_sizes, settings.min_effect, cap_cycles, elapsed, settings.max_seconds
        )
        if found:
            reason = found
            break
        expected = expected_cycles(runs, names[0], settings, k, cap_cycles)
    flags = []
    sweep = {"runs": runs, "batch_sizes": list(settings.batch_sizes)}
    if not quick and reason != "settled":
        flags.append("target_not_reached")
    if high_spread(sweep, names[0]):
        flags.append("high_spread")
    if rows_missing(runs, settings.batch_sizes):
        flags.append("sweep_row_missing")
    return runs, flags, states, settings.stop_payload(reason, time.monotonic() - started, seed)
