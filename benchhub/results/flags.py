"""Server-side flags: the agent's own flags plus what the server sees in the payload itself, so a
submission cannot avoid a flag by leaving it out. Pure functions of the payload and its campaign.

- `nonstandard_sweep`: it measured something other than its campaign asks (other sweep settings,
  other variant environment, fewer than two rounds). Stored, shown, never in a cell.
- `quarantined`: numbers no honest run gives (model sizes that are zero or disagree, a speed-up
  outside the campaign's plausible range, a decode rate beyond the chip's memory bandwidth).
  Stored and shown, out of the cells until a moderator releases it.
- `local_source`: built from the contributor's own llama.cpp tree (`--llama-src`) or binaries
  (`--variant`), not from the campaign's commit fetched by the agent (`llama_cpp.source` = "local").
  Stored and shown.
- A model claim that conflicts with another is held at refresh time (claims.py), not flagged here.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from benchhub_protocol import model_facts, rounds, stats
from benchhub_protocol.rounds import sweep_differences

from benchhub.results import plausibility
from benchhub.results.campaigns import CampaignRules, campaign_rules

NONSTANDARD_SWEEP = "nonstandard_sweep"
QUARANTINED = "quarantined"
LOCAL_SOURCE = "local_source"
RUN_STATE_FLAGS = frozenset({"on_battery", "low_power_mode", "thermal_pressure"})

MIN_ROUNDS = rounds.MIN_ROUNDS


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


def implausible(payload: dict[str, Any], rules: CampaignRules) -> list[str]:
    """What no honest run gives, one phrase each: sizes that disagree, a speed-up outside the
    campaign's plausible range, or a decode rate beyond the memory bandwidth of the chip for the
    bytes a decode step reads (a mixture of experts reads only the experts it uses)."""
    # Facts that contradict each other are refused at ingest (400); a payload stored before that
    # rule is held here instead.
    found = [contradiction.detail for contradiction in model_facts.contradictions(payload["model"])]
    weights = max(model_facts.decode_bytes(payload["model"]), 1.0)
    low, high = rules.plausible_ratio
    for (variant, batch_size), numbers in sorted(paired_numbers(payload).items()):
        if not low <= numbers.speedup <= high:
            found.append(f"{variant} at BS{batch_size} is {numbers.speedup:.3g}x its baseline")
    bandwidth = plausibility.bandwidth_bytes_per_s(payload["machine"]["chip"])
    for run in payload["sweep"]["runs"]:
        for row in run["rows"]:
            ceiling = plausibility.MARGIN * row["batch_size"] * bandwidth / weights
            if row["tg_tps"] > ceiling:
                found.append(
                    f"{run['variant']} at BS{row['batch_size']} decodes {row['tg_tps']:.4g} t/s, beyond "
                    f"{ceiling:.4g} t/s for {weights / 1e9:.3g} GB read a token at {bandwidth / 1e9:.4g} GB/s"
                )
    return found


def derive(payload: dict[str, Any], definition: dict[str, Any]) -> list[str]:
    found = set(payload["flags"])
    if nonstandard_reasons(payload, definition):
        found.add(NONSTANDARD_SWEEP)
    if implausible(payload, campaign_rules(definition)):
        found.add(QUARANTINED)
    if payload["llama_cpp"].get("source") == "local":
        found.add(LOCAL_SOURCE)
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
