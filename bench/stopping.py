"""`python -m bench.stopping`: the agent's stop rule as shipped, simulated at the noise measured on the device.

The rule is imported, not copied: benchhub_protocol.rounds.cycle_orders (whole cycles, a random Latin square
per cycle), judge_sweep (the site's estimate over whole cycles, cycles.submission_estimate, with the
sequential interval) and stop_reason ("settled", "rounds", "time"). The sweep is campaign mv-ext-iquants'
shape: a baseline and two variants, identical code (A/A), every batch size a cell.

Noise, from tests/agent/fixtures/noise-by-size/ (one NVIDIA H100, 2026-12-07, llama.cpp 0c1e570, CUDA,
random-weight IQ4_NL llamas, 8 processes per setting, and the A/A agent runs on the 8B model): each process
carries its own offset, shared by its batch sizes with correlation rho; per batch size the offset's SD is
sigma. A world may add an offset shared by every process of a round (round_sigma: the part of the
process-to-process spread that the rounds' effects take out). A process takes the seconds measured there,
so a cycle of 3 rounds of 3 processes takes 9 of them, and the time budget is the campaign's default. A
false verdict is an A/A cell that reads "faster" or "slower".
"""

from __future__ import annotations

import argparse
import math
import random
import statistics
from dataclasses import dataclass
from typing import Any

from benchhub_protocol.rounds import (
    DEFAULT_MAX_SECONDS,
    DEFAULT_MIN_EFFECT,
    MAX_ROUNDS,
    _balanced_spread,
    cycle_orders,
    cycle_runs,
    judge_sweep,
    stop_reason,
)
from benchhub_protocol.words import DIRECTIONAL, WITHIN

VARIANTS = ("upstream", "01", "01+02")
CAMPAIGN_SIZES = (1, 2, 3, 4, 5, 8, 9, 12, 16)


@dataclass(frozen=True)
class World:
    label: str
    sigma: float  # per-process SD of log decode speed at one batch size
    rho: float  # correlation of a process's offsets across its batch sizes
    process_s: float  # seconds a process
    batch_sizes: tuple[int, ...] = CAMPAIGN_SIZES
    round_sigma: float = 0.0  # SD of an offset shared by every process of a round (all its batch sizes)


# Measured on the H100 (tests/agent/fixtures/noise-by-size/README.md): the median over batch sizes of the SD
# across 8 probe processes, the mean correlation across batch-size pairs, the median seconds a process.
# "the runs' residual" is the spread the A/A agent runs on the same machine measured after round, variant
# and position effects (the median over their cells of rounds._balanced_spread: what the rule's interval
# uses); "the runs' raw" adds what those effects took out, an offset shared by a round's processes (run 2:
# 1.37% a process with variant effects alone, 0.87% after round effects too), which round pairing cancels.
# The probe's 1.40% is that raw spread: simulated as every process's own, it is the pessimistic world.
WORLDS = (
    World("1B, ntg 64, the probe", 0.0308, 0.73, 2.36),
    World("8B, ntg 64, the probe", 0.0140, 0.74, 5.53),
    World("8B, ntg 64, the runs' residual", 0.0100, 0.74, 5.53),
    World("8B, ntg 64, the runs' raw", 0.0100, 0.74, 5.53, round_sigma=0.0100),
)


def measured_spreads(payload: dict[str, Any]) -> tuple[float, float]:
    """What an A/A run's payload says of its noise, over its whole cycles, as the median over batch sizes:
    (raw, residual). raw: the SD of a process's log decode speed with only the variants' effects removed
    (what a probe of separate processes sees); residual: after round and position effects too
    (rounds._balanced_spread, what the stop rule's interval uses)."""
    runs = cycle_runs(payload["sweep"]["runs"])
    raw, residual = [], []
    for size in payload["sweep"]["batch_sizes"]:
        by_variant: dict[str, list[float]] = {}
        for run in runs:
            for row in run["rows"]:
                if row["batch_size"] == size and row["tg_tps"] > 0:
                    by_variant.setdefault(run["variant"], []).append(math.log(row["tg_tps"]))
        deviations = [value - statistics.fmean(values) for values in by_variant.values() for value in values]
        raw.append(math.sqrt(math.fsum(d * d for d in deviations) / (len(deviations) - len(by_variant))))
        fitted = _balanced_spread(runs, size)
        if fitted:
            residual.append(fitted[0])
    return statistics.median(raw), statistics.median(residual)


def simulate_sweep(world: World, rng: random.Random, max_seconds: float = DEFAULT_MAX_SECONDS) -> dict[str, Any]:
    runs: list[dict[str, Any]] = []
    seed = rng.randrange(2**31)
    cap_cycles = MAX_ROUNDS // len(VARIANTS)
    common, own = math.sqrt(world.rho), math.sqrt(1 - world.rho)
    cycle = 0
    while True:
        for index, order in enumerate(cycle_orders(VARIANTS, seed, cycle)):
            rep = cycle * len(VARIANTS) + index + 1
            in_round = rng.gauss(0, world.round_sigma) if world.round_sigma else 0.0
            for name in order:
                shared = rng.gauss(0, 1)
                rows = [
                    {
                        "batch_size": size,
                        "tg_tps": 100.0
                        * size
                        * math.exp(in_round + world.sigma * (common * shared + own * rng.gauss(0, 1))),
                    }
                    for size in world.batch_sizes
                ]
                runs.append({"variant": name, "rep": rep, "seq": len(runs) + 1, "exit_code": 0, "rows": rows})
        cycle += 1
        elapsed = cycle * len(VARIANTS) ** 2 * world.process_s
        reason = stop_reason(runs, VARIANTS[0], world.batch_sizes, DEFAULT_MIN_EFFECT, cap_cycles, elapsed, max_seconds)
        if reason:
            break
    verdicts = judge_sweep(runs, VARIANTS[0], world.batch_sizes, DEFAULT_MIN_EFFECT, cap_cycles)
    words = [found.verdict if found else "none" for found in verdicts.values()]
    return {"reason": reason, "cycles": cycle, "seconds": elapsed, "verdicts": words}


def summarise(world: World, sweeps: list[dict[str, Any]]) -> dict[str, Any]:
    cells = [word for sweep in sweeps for word in sweep["verdicts"]]
    false = sum(word in DIRECTIONAL for word in cells)
    reasons = {
        reason: sum(sweep["reason"] == reason for sweep in sweeps) / len(sweeps)
        for reason in ("settled", "time", "rounds")
    }
    return {
        "world": world.label,
        "cells_false": false / len(cells),
        "sweeps_any_false": sum(any(w in DIRECTIONAL for w in s["verdicts"]) for s in sweeps) / len(sweeps),
        "cells_within": sum(word == WITHIN for word in cells) / len(cells),
        "median_stop_min": statistics.median(sweep["seconds"] for sweep in sweeps) / 60,
        "median_cycles": statistics.median(sweep["cycles"] for sweep in sweeps),
        "reasons": reasons,
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sweeps", type=int, default=200)
    parser.add_argument("--seed", type=int, default=44)
    options = parser.parse_args(argv)
    print(
        f"{options.sweeps} simulated A/A sweeps a world (seed {options.seed}), 3 variants, min_effect "
        f"{DEFAULT_MIN_EFFECT:.0%}, cap {MAX_ROUNDS} rounds, budget {DEFAULT_MAX_SECONDS / 60:.0f} min"
    )
    print(f"{'world':<32} {'false cells':>11} {'false sweeps':>12} {'within':>7} {'median stop':>11}  stopped by")
    for world in WORLDS:
        rng = random.Random(options.seed)
        found = summarise(world, [simulate_sweep(world, rng) for _ in range(options.sweeps)])
        reasons = ", ".join(f"{name} {share:.0%}" for name, share in found["reasons"].items() if share)
        print(
            f"{world.label:<32} {found['cells_false']:>11.1%} {found['sweeps_any_false']:>12.1%} "
            f"{found['cells_within']:>7.0%} {found['median_stop_min']:>7.1f} min  {reasons} "
            f"(median {found['median_cycles']:g} cycles)"
        )


if __name__ == "__main__":
    main()
