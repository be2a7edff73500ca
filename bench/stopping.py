"""`python -m bench.stopping`: how many rounds the agent's stopping rule takes, simulated.

The rule is the agent's own (benchhub_protocol.rounds and the agent's sweep): rounds in mirrored pairs, at least
two, more pairs until every non-baseline cell's 95% interval of the round-paired ratio is within ±1%,
or the cap (10 rounds) comes first, which is `high_spread`. The sweep is the campaign mv-ext-iquants:
a baseline and two variants, 9 batch sizes.

Each run's decode speed at each batch size is its true value times exp(noise). "Per-run noise" of x%
is the standard deviation of that noise. The A/A experiment on an H200 (docs/method.md) found it is
per process: one draw shared by every batch size of a run (`shared`). Noise drawn afresh for every
batch size (`per row`) is the harder case for a rule that waits for all 18 cells, and is shown too.
Coverage is the share of cells whose final interval holds the true ratio (the rule stops on the data,
so this checks that stopping early does not cost the interval its 95%); "every cell held" counts the
sweeps in which all 18 intervals held theirs, what an A/A replay asks of one sweep.
"""

from __future__ import annotations

import argparse
import math
import random
import statistics
from typing import Any

from benchhub_agent.sweep import DEFAULT_MAX_ROUNDS, interleaved_round, precise_enough
from benchhub_protocol.rounds import high_spread, ratio_interval, round_ratios

BATCH_SIZES = (1, 2, 3, 4, 5, 8, 9, 12, 16)
TRUE_SPEEDUP = {"upstream": 1.0, "01": 1.4, "01+02": 1.6}  # the seed's magnitudes; the rule sees ratios only


def simulate_sweep(noise: float, shared: float, rng: random.Random, cap: int = DEFAULT_MAX_ROUNDS) -> dict[str, Any]:
    """One sweep under the rule. `shared` is the share of the noise's variance common to a run's rows."""
    names = list(TRUE_SPEEDUP)
    runs: list[dict[str, Any]] = []
    rounds = 0
    while True:
        for name in interleaved_round(names, rounds):
            common = rng.gauss(0, noise * math.sqrt(shared))
            rows = [
                {
                    "batch_size": size,
                    "tg_tps": 100.0 * size**0.5 * TRUE_SPEEDUP[name]
                    * math.exp(common + rng.gauss(0, noise * math.sqrt(1 - shared))),
                }
                for size in BATCH_SIZES
            ]  # fmt: skip
            runs.append({"variant": name, "rep": rounds + 1, "rows": rows})
        rounds += 1
        if rounds >= 2 and rounds % 2 == 0 and (rounds >= cap or precise_enough(runs, BATCH_SIZES, names[0])):
            break
    sweep = {"runs": runs, "batch_sizes": list(BATCH_SIZES)}
    held = 0
    for name in names[1:]:
        for size in BATCH_SIZES:
            low, high = ratio_interval(round_ratios(runs, name, names[0], size)) or (0.0, 0.0)
            held += low <= TRUE_SPEEDUP[name] <= high
    return {"rounds": rounds, "high_spread": high_spread(sweep, names[0]), "held": held, "cells": 2 * len(BATCH_SIZES)}


def summary(noise: float, shared: float, sweeps: int, seed: int) -> str:
    rng = random.Random(seed)
    results = [simulate_sweep(noise, shared, rng) for _ in range(sweeps)]
    rounds = sorted(result["rounds"] for result in results)
    counts = {n: rounds.count(n) for n in sorted(set(rounds))}
    flagged = sum(result["high_spread"] for result in results)
    coverage = sum(result["held"] for result in results) / sum(result["cells"] for result in results)
    all_held = sum(result["held"] == result["cells"] for result in results)
    kind = "shared" if shared == 1 else "per row" if shared == 0 else f"{shared:.0%} shared"
    return (
        f"noise {noise * 100:.1f}% {kind}: "
        f"median {statistics.median(rounds):g} rounds, p90 {rounds[int(0.9 * len(rounds))]}, "
        f"rounds {counts}, high_spread {flagged}/{sweeps}, coverage {coverage:.1%}, "
        f"every cell held {all_held}/{sweeps}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.stopping", description=__doc__)
    parser.add_argument("--sweeps", type=int, default=400)
    parser.add_argument("--seed", type=int, default=24)
    options = parser.parse_args()
    print(
        f"{options.sweeps} simulated sweeps each, 3 variants x {len(BATCH_SIZES)} batch sizes, cap {DEFAULT_MAX_ROUNDS}"
    )
    for noise in (0.003, 0.005, 0.01, 0.03):
        for shared in (1.0, 0.5, 0.0):
            print(summary(noise, shared, options.sweeps, options.seed))


if __name__ == "__main__":
    main()
