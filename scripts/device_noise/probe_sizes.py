"""Device probe, issue 44: per-process noise of llama-batched-bench against model size, with the agent's own
arguments (benchhub_agent.sweep.batched_bench_args), one binary for every process (A/A), the conditions
interleaved round by round. Writes every process's raw output, and per condition: the SD across processes of
log tg_tps at each batch size, the correlation across batch sizes of the processes' offsets, the seconds a
process, and what the shipped stop rule (benchhub_protocol.rounds.cycles_to_settle) then expects.

usage: probe_sizes.py BIN_DIR OUT_DIR ROUNDS NAME=MODEL:NTG [NAME=MODEL:NTG ...]
"""

import itertools
import json
import math
import statistics
import subprocess
import sys
import time
from pathlib import Path

from benchhub_agent.sweep import SweepSettings, batched_bench_args
from benchhub_protocol import rounds as R

SIZES = (1, 2, 3, 4, 5, 8, 9, 12, 16)  # the campaign's (mv-ext-iquants)
VARIANTS = 3  # the campaign's: a cycle is 3 rounds of 3 processes


def settings(ntg: int) -> SweepSettings:
    return SweepSettings(npp=128, ntg=ntg, batch_sizes=SIZES, reps=2, max_reps=30, flash_attn=True, n_gpu_layers=99)


def correlation(xs, ys):
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    sxy = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True))
    sxx = sum((x - mx) ** 2 for x in xs)
    syy = sum((y - my) ** 2 for y in ys)
    return sxy / math.sqrt(sxx * syy) if sxx > 0 and syy > 0 else float("nan")


def summarise(procs):
    ok = [p for p in procs if p["rc"] == 0 and len(p["tg"]) == len(SIZES)]
    per_size = {}
    offsets = {}
    for size in SIZES:
        logs = [math.log(p["tg"][size]) for p in ok]
        if len(logs) >= 3:
            per_size[size] = statistics.stdev(logs)
            mean = statistics.fmean(logs)
            offsets[size] = [value - mean for value in logs]
    pairs = [correlation(offsets[a], offsets[b]) for a, b in itertools.combinations(offsets, 2)]
    neighbours = [
        correlation(offsets[a], offsets[b]) for a, b in itertools.pairwise(SIZES) if a in offsets and b in offsets
    ]
    sigma = statistics.median(per_size.values()) if per_size else None
    seconds = statistics.median(p["seconds"] for p in procs)
    cycles = R.cycles_to_settle(sigma, 0.0, VARIANTS, R.DEFAULT_MIN_EFFECT, 30) if sigma else None
    slow = R.cycles_to_settle(1.5 * sigma, 0.0, VARIANTS, R.DEFAULT_MIN_EFFECT, 30) if sigma else None
    per_cycle = VARIANTS * VARIANTS * seconds
    return {
        "processes": len(procs),
        "ok": len(ok),
        "sigma_median": sigma,
        "sigma_max": max(per_size.values()) if per_size else None,
        "sigma_by_size": per_size,
        "tg_tps_median_by_size": {s: statistics.median(p["tg"][s] for p in ok) for s in SIZES} if ok else {},
        "corr_all_pairs_mean": statistics.fmean(pairs) if pairs else None,
        "corr_neighbours_mean": statistics.fmean(neighbours) if neighbours else None,
        "process_s": seconds,
        "cycle_s": per_cycle,
        "cycles_to_settle_aa": cycles,
        "cycles_to_settle_aa_at_1.5_sigma": slow,
        "sweep_s_expected": cycles * per_cycle if cycles else None,
    }


def main():
    bin_dir, out, n_rounds = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3])
    conditions = {}
    for spec in sys.argv[4:]:
        name, rest = spec.split("=", 1)
        model, ntg = rest.rsplit(":", 1)
        conditions[name] = (Path(model), int(ntg))
    out.mkdir(parents=True, exist_ok=True)
    results = {name: [] for name in conditions}
    names = list(conditions)
    for r in range(n_rounds):
        order = names[r % len(names) :] + names[: r % len(names)]
        for name in order:
            model, ntg = conditions[name]
            args = batched_bench_args(bin_dir / "llama-batched-bench", model, settings(ntg))
            t0 = time.time()
            done = subprocess.run(args, capture_output=True, text=True)
            seconds = time.time() - t0
            (out / f"{name}_r{r:02d}.jsonl").write_text(done.stdout)
            if done.returncode:
                (out / f"{name}_r{r:02d}.stderr").write_text(done.stderr[-4000:])
            rows = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
            measured = rows[len(settings(ntg).warmup_sizes) :]
            tg = {row["pl"]: row["speed_tg"] for row in measured if "pl" in row}
            results[name].append({"seconds": seconds, "rc": done.returncode, "tg": tg})
            print(f"{name} r{r} rc={done.returncode} {seconds:.1f}s", flush=True)
    summary = {name: summarise(procs) for name, procs in results.items()}
    (out / "summary.json").write_text(json.dumps(summary, indent=1))
    for name, s in summary.items():
        sig = s["sigma_median"]
        print(
            f"{name:12s} ok {s['ok']}/{s['processes']} sigma {100 * sig if sig else float('nan'):.2f}% "
            f"(max {100 * (s['sigma_max'] or float('nan')):.2f}%) corr {s['corr_all_pairs_mean']} "
            f"process {s['process_s']:.1f}s cycles {s['cycles_to_settle_aa']}-{s['cycles_to_settle_aa_at_1.5_sigma']}"
        )


if __name__ == "__main__":
    main()
