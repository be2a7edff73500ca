"""Server-side flags: the agent's own flags plus what the server sees in the payload itself, so a
submission cannot avoid a flag by leaving it out. Pure functions of the payload and its campaign.

- `nonstandard_sweep`: it measured something other than its campaign asks (other sweep settings,
  other variant environment, fewer than two rounds). Stored, shown, never in a cell.
- `quarantined`: numbers no honest run gives (a variant beyond 10x or under 0.1x its baseline, or a
  rate beyond what any GPU can decode for the model's size). Stored, out of the cells until a
  moderator releases it.
- `model_conflict` is set by ingest (it needs the other claims about the same file).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from benchhub_protocol import rounds, stats
from benchhub_protocol.rounds import sweep_differences

NONSTANDARD_SWEEP = "nonstandard_sweep"
QUARANTINED = "quarantined"
MODEL_CONFLICT = "model_conflict"
RUN_STATE_FLAGS = frozenset({"on_battery", "low_power_mode", "thermal_pressure"})

MIN_ROUNDS = rounds.MIN_ROUNDS
# A variant's paired speedup outside these bounds is no patch's effect.
PLAUSIBLE_SPEEDUP = (0.1, 10.0)
# Decode streams every weight once per step, so a step of b sequences yields at most b tokens per
# pass over the model's bytes; 10 TB/s is above any GPU's memory bandwidth (an H200 has 4.8).
MAX_BANDWIDTH_BYTES_PER_S = 10e12
# No GGUF quantisation stores fewer bits a weight than IQ1_S (1.56): a floor on a file's bytes
# that a claimed size_bytes cannot talk down.
MIN_BITS_PER_WEIGHT = 1.5

Rounds = dict[str, dict[int, dict[int, float]]]  # variant -> batch size -> rep -> tg_tps


def rounds_of(runs: list[dict[str, Any]]) -> Rounds:
    """Each variant's tg_tps per batch size and round (runs sharing a `rep`)."""
    found: Rounds = defaultdict(lambda: defaultdict(dict))
    for run in runs:
        for row in run["rows"]:
            found[run["variant"]][row["batch_size"]][run["rep"]] = row["tg_tps"]
    return found


def paired_numbers(payload: dict[str, Any]) -> dict[tuple[str, int], stats.PairedNumbers]:
    """Every variant's round-paired numbers per batch size (the baseline's own speedup is 1)."""
    by_variant = rounds_of(payload["sweep"]["runs"])
    baseline = by_variant.get(payload["variants"][0]["name"], {})
    found = {}
    for variant, by_size in by_variant.items():
        for batch_size, by_round in by_size.items():
            numbers = stats.paired(by_round, baseline.get(batch_size, {}))
            if numbers is not None:
                found[(variant, batch_size)] = numbers
    return found


def env_differences(payload: dict[str, Any], campaign_variants: dict[str, dict[str, str]]) -> list[str]:
    return [
        f"variant {variant['name']} ran with env {variant['env']} instead of {campaign_variants[variant['name']]}"
        for variant in payload["variants"]
        if variant["name"] in campaign_variants and variant["env"] != campaign_variants[variant["name"]]
    ]


def nonstandard_reasons(payload: dict[str, Any], definition: dict[str, Any]) -> list[str]:
    """Why the payload does not measure what its campaign asks, one phrase each (none: standard)."""
    reasons = sweep_differences(payload["sweep"], definition["sweep"])  # the agent's rule, so it warns first
    reasons += env_differences(payload, {variant["name"]: variant.get("env", {}) for variant in definition["variants"]})
    rounds = {run["rep"] for run in payload["sweep"]["runs"]}
    if len(rounds) < MIN_ROUNDS:
        reasons.append(f"{len(rounds)} round(s) instead of at least {MIN_ROUNDS}")
    return reasons


def implausible(payload: dict[str, Any]) -> list[str]:
    """What no honest run gives, one phrase each."""
    model = payload["model"]
    model_bytes = max(model["size_bytes"], model["n_params"] * MIN_BITS_PER_WEIGHT / 8, 1)
    low, high = PLAUSIBLE_SPEEDUP
    found = []
    for (variant, batch_size), numbers in sorted(paired_numbers(payload).items()):
        if not low <= numbers.speedup <= high:
            found.append(f"{variant} at BS{batch_size} is {numbers.speedup:.3g}x its baseline")
    for run in payload["sweep"]["runs"]:
        for row in run["rows"]:
            ceiling = row["batch_size"] * MAX_BANDWIDTH_BYTES_PER_S / model_bytes
            if row["tg_tps"] > ceiling:
                found.append(
                    f"{run['variant']} at BS{row['batch_size']} decodes {row['tg_tps']:.4g} t/s, beyond "
                    f"{ceiling:.4g} t/s for a {model_bytes / 1e9:.3g} GB model"
                )
    return found


def derive(payload: dict[str, Any], definition: dict[str, Any]) -> list[str]:
    found = set(payload["flags"])
    if nonstandard_reasons(payload, definition):
        found.add(NONSTANDARD_SWEEP)
    if implausible(payload):
        found.add(QUARANTINED)
    machine = payload["machine"]
    if machine["power_source"] == "battery":
        found.add("on_battery")
    if machine["low_power_mode"] is True:
        found.add("low_power_mode")
    if machine["thermal"] == "pressure":
        found.add("thermal_pressure")
    if any(check["status"] == "fail" for check in payload["correctness"]):
        found.add("correctness_failed")
    if any(check["degenerate"] for check in payload["generation"]):
        found.add("degenerate_output")
    baseline = payload["variants"][0]["name"]
    if any(not check["identical_to_baseline"] for check in payload["generation"] if check["variant"] != baseline):
        found.add("variant_output_mismatch")
    if _rows_missing(payload["sweep"]):
        found.add("sweep_row_missing")
    if rounds.high_spread(payload["sweep"], baseline):  # the agent's rule, so it cannot be left out
        found.add("high_spread")
    return sorted(found)


def _rows_missing(sweep: dict[str, Any]) -> bool:
    wanted = set(sweep["batch_sizes"])
    return any(run["exit_code"] != 0 or {row["batch_size"] for row in run["rows"]} != wanted for run in sweep["runs"])
