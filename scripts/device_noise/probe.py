"""Device probe: per-process noise of llama-batched-bench under candidate sweep settings (A/A: one binary),
run interleaved, with the agent's own argument builder. Prints, per condition, the median over batch
sizes of the SD of log tg_tps across processes, the projected rounds for the agent's target, and the
process time; writes the summary, and the condition picked for the agent runs (or none), into OUT_DIR.

usage: probe.py BIN_DIR MODEL OUT_DIR ROUNDS
"""

import json
import math
import statistics
import subprocess
import sys
import time
from pathlib import Path

from benchhub_agent.sweep import SweepSettings, batched_bench_args
from benchhub_protocol import rounds as R

SIZES = (1, 2, 3, 4, 5, 8, 9, 12, 16)
CONDITIONS = {  # name: (ntg, extra_args)
    "ntg64": (64, ()),
    "ntg64-t1": (64, ("-t", "1")),
    "ntg256": (256, ()),
    "ntg256-t1": (256, ("-t", "1")),
}


def settings(ntg, extra):
    return SweepSettings(
        npp=128, ntg=ntg, batch_sizes=SIZES, reps=2, max_reps=30, flash_attn=True, n_gpu_layers=99, extra_args=extra
    )


def rounds_needed(sigma):
    """Smallest n in 2..30 where the agent's balanced 3-variant interval meets ±1%; None beyond 30."""
    for n in range(2, 31):
        df = 2 * n - 4
        if df < 1:
            continue
        if R.t_quantile(df) * math.sqrt(2 * sigma**2 / n + R.RUN_TO_RUN_SD**2) <= 0.01:
            return n
    return None


def main():
    bin_dir, model, out, n_rounds = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3]), int(sys.argv[4])
    out.mkdir(parents=True, exist_ok=True)
    results = {name: [] for name in CONDITIONS}
    for r in range(n_rounds):
        names = list(CONDITIONS)
        names = names[r % len(names) :] + names[: r % len(names)]  # rotate the order each round
        for name in names:
            ntg, extra = CONDITIONS[name]
            args = batched_bench_args(bin_dir / "llama-batched-bench", model, settings(ntg, extra))
            t0 = time.time()
            done = subprocess.run(args, capture_output=True, text=True)
            seconds = time.time() - t0
            rows = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
            (out / f"{name}_r{r:02d}.jsonl").write_text(done.stdout)
            if done.returncode:
                (out / f"{name}_r{r:02d}.stderr").write_text(done.stderr[-4000:])
            measured = rows[len(settings(ntg, extra).warmup_sizes) :]
            results[name].append(
                {
                    "seconds": seconds,
                    "rc": done.returncode,
                    "tg": {row["pl"]: row["speed_tg"] for row in measured if "pl" in row},
                }
            )
    summary = {}
    for name, procs in results.items():
        ok = [p for p in procs if p["rc"] == 0 and p["tg"]]
        per_size = {}
        for size in SIZES:
            logs = [math.log(p["tg"][size]) for p in ok if p["tg"].get(size)]
            if len(logs) >= 3:
                per_size[size] = statistics.stdev(logs)
        sigma = statistics.median(per_size.values()) if per_size else None
        seconds = statistics.median(p["seconds"] for p in procs)
        need = rounds_needed(sigma) if sigma else None
        summary[name] = {
            "processes": len(procs),
            "ok": len(ok),
            "sigma_median": sigma,
            "sigma_by_size": per_size,
            "process_s": seconds,
            "rounds_needed": need,
            "sweep_s_projected": need * 3 * seconds if need else None,
        }
        print(
            f"{name:10s} ok {len(ok)}/{len(procs)} sigma {100 * sigma if sigma else float('nan'):.2f}% "
            f"process {seconds:.1f} s rounds_needed {need} sweep_projected "
            f"{need * 3 * seconds if need else float('nan'):.0f} s  by size "
            + " ".join(f"{s}:{100 * v:.1f}" for s, v in per_size.items())
        )
    (out / "probe.json").write_text(json.dumps(summary, indent=1))
    # The runs go ahead only with a condition that is projected to stop well before the cap and the budget.
    # Only settings a campaign can state (schema: extra_args is an allow-list without -t) are candidates.
    fit = [
        (v["sweep_s_projected"], k)
        for k, v in summary.items()
        if v["rounds_needed"] and v["rounds_needed"] <= 22 and v["sweep_s_projected"] <= 360 and not CONDITIONS[k][1]
    ]
    choice = min(fit)[1] if fit else None
    (out / "choice.json").write_text(
        json.dumps(
            {
                "choice": choice,
                "ntg": CONDITIONS[choice][0] if choice else None,
                "extra_args": list(CONDITIONS[choice][1]) if choice else None,
            }
        )
    )
    print("choice:", choice)


if __name__ == "__main__":
    main()
