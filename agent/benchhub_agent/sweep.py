"""The interleaved batched-bench sweep: mirrored pairs of rounds until every cell is precise enough.

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

from benchhub_protocol.rounds import MIN_ROUNDS, high_spread, sweep_differences

from .tools import check_offload, parse_batched_bench_jsonl, run_tool

CTX_ALIGN = 256
DEFAULT_MAX_ROUNDS = 10  # 5 mirrored pairs: at the A/A noise of an H200 (3-4% per run) still short of ±1%
DEFAULT_MAX_SECONDS = 45 * 60  # no new pair starts when it would end past this
# llama.cpp prints its library's INFO lines (where `offloaded N/M layers to GPU` is) from verbosity 4 on.
LOG_VERBOSITY = ("-lv", "4")


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
    max_seconds: float = DEFAULT_MAX_SECONDS

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


def planned_differences(settings: SweepSettings, campaign_sweep: dict[str, Any]) -> list[str]:
    """sweep_differences of the sweep these settings will run, said before it runs."""
    planned = [{"rep": rep} for rep in range(1, settings.reps + 1)]
    return sweep_differences({**settings.as_payload([]), "runs": planned}, campaign_sweep)


def batched_bench_args(binary: Path, model: Path, settings: SweepSettings) -> list[str]:
    # The batch-size list twice: the first pass warms the process up (its first pass ran 6.5-18% slower
    # on an H200, docs/method.md) and is dropped; the campaign's own -npp/-ntg are kept.
    sizes = ",".join(map(str, settings.batch_sizes))
    return [
        str(binary),
        "-m", str(model),
        "-npp", str(settings.npp),
        "-ntg", str(settings.ntg),
        "-npl", f"{sizes},{sizes}",
        "-c", str(settings.n_ctx),
        "-kvu",
        "-fa", "on" if settings.flash_attn else "off",
        "-ngl", str(settings.n_gpu_layers),
        *settings.extra_args,
        *LOG_VERBOSITY,
        "--output-format", "jsonl",
    ]  # fmt: skip


def measured_rows(rows: Sequence[dict[str, Any]], batch_sizes: Sequence[int]) -> list[dict[str, Any]]:
    """The rows of the measured pass: each batch size's second row. A run that aborted in its warm-up
    pass measured nothing."""
    seen: set[int] = set()
    kept: list[dict[str, Any]] = []
    for row in rows:
        size = row["batch_size"]
        if size not in batch_sizes:
            continue
        if size in seen and all(size != done["batch_size"] for done in kept):
            kept.append(row)
        seen.add(size)
    return kept


def rows_missing(runs: Sequence[dict[str, Any]], batch_sizes: Sequence[int]) -> bool:
    return any(run["exit_code"] != 0 or len(run["rows"]) < len(batch_sizes) for run in runs)


def precise_enough(runs: list[dict[str, Any]], batch_sizes: Sequence[int], baseline: str) -> bool:
    return not high_spread({"runs": runs, "batch_sizes": list(batch_sizes)}, baseline)


def _row_reporter(
    label: str, fraction_at: Callable[[float], float], n_rows: int, report: Callable[[str, float | None], None]
) -> Callable[[str], None]:
    """Shows each row's decode speed as batched-bench prints it, warm-up rows marked, with the share done."""
    printed = 0

    def on_line(line: str) -> None:
        nonlocal printed
        rows = parse_batched_bench_jsonl(line)
        if rows:
            printed += 1
            stage = "warm-up, " if printed <= n_rows // 2 else ""
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

    def run(self, name: str, rep: int, seq: int, planned: int) -> dict[str, Any]:
        bin_dir, env = self.variants[name]
        label = f"{name} round {rep} (run {seq} of {planned})"
        self.report(label, (seq - 1) / planned)
        done = run_tool(
            batched_bench_args(bin_dir / "llama-batched-bench", self.model, self.settings),
            self.log_dir / f"batched-bench-{seq:03d}-{name}-rep{rep}",
            env=env,
            on_line=_row_reporter(
                label, lambda done: (seq - 1 + done) / planned, 2 * len(self.settings.batch_sizes), self.report
            ),
        )
        if self.require_offload:
            check_offload(done.stderr, self.require_offload, name, self.settings.n_gpu_layers)
        rows = measured_rows(parse_batched_bench_jsonl(done.stdout), self.settings.batch_sizes)
        return {"variant": name, "rep": rep, "seq": seq, "exit_code": done.exit_code, "rows": rows}


def run_sweep(
    variants: Sequence[tuple[str, Path, dict[str, str]]],
    model: Path,
    settings: SweepSettings,
    log_dir: Path,
    report: Callable[[str, float | None], None],
    sample_state: Callable[[], dict[str, Any]] | None = None,
    require_offload: str | None = None,
) -> tuple[list[dict[str, Any]], list[str], list[dict[str, Any]]]:
    """Rounds in mirrored pairs (A B C, C B A), at least `reps` rounds; then more pairs until every
    cell's 95% interval is within ±1% (benchhub_protocol.rounds), or the cap on rounds or time comes first, which
    is what `high_spread` then says. The first variant is the baseline. `sample_state` reads the
    machine's run state before every round; `require_offload` (a device backend's name) stops the
    sweep when a run's log shows the model was not offloaded to it.

    Returns the runs (docs/protocol.md 4.4), the sweep's flags and the run-state samples."""
    names = [name for name, _, _ in variants]
    rounds = _Round(
        {name: (bin_dir, env) for name, bin_dir, env in variants}, model, settings, log_dir, report, require_offload
    )
    runs: list[dict[str, Any]] = []
    states: list[dict[str, Any]] = []
    started = time.monotonic()
    # One round alone is allowed (a quick look) but is not standard; otherwise rounds come in pairs.
    minimum = settings.reps if settings.reps < MIN_ROUNDS else settings.reps + settings.reps % 2
    cap = max(minimum, settings.max_reps - settings.max_reps % 2)
    round_index = 0
    while True:
        if sample_state:
            states.append(sample_state())
        # Planned so far: through the end of this pair of rounds (whether another follows is not known yet).
        pair_end = round_index + 2 - round_index % 2
        planned = (minimum if minimum < MIN_ROUNDS else max(minimum, pair_end)) * len(names)
        for name in interleaved_round(names, round_index):
            runs.append(rounds.run(name, round_index + 1, len(runs) + 1, planned))
        round_index += 1
        if round_index < minimum:
            continue
        if minimum < MIN_ROUNDS:
            break
        if round_index % 2:
            continue
        pair_seconds = (time.monotonic() - started) / (round_index / 2)
        out_of_time = time.monotonic() - started + pair_seconds > settings.max_seconds
        if round_index >= cap or out_of_time or precise_enough(runs, settings.batch_sizes, names[0]):
            break
    flags = []
    if not precise_enough(runs, settings.batch_sizes, names[0]):  # the cap came first
        flags.append("high_spread")
    if rows_missing(runs, settings.batch_sizes):
        flags.append("sweep_row_missing")
    return runs, flags, states
