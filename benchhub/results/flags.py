"""Server-side flags: the agent's own flags plus what the server sees in the numbers itself, so a
submission cannot avoid a flag by leaving it out. One flag is the server's alone: `nonstandard_sweep`,
a sweep run with settings other than its campaign's (the agent's --npp/--ntg, an older manifest),
whose numbers are stored but kept out of the cells, since they measure something else."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from benchhub_agent.sweep import sweep_differences
from django.conf import settings

from benchhub.results import stats

NONSTANDARD_SWEEP = "nonstandard_sweep"


def derive(payload: dict[str, Any], campaign_sweep: dict[str, Any]) -> list[str]:
    found = set(payload["flags"])
    if sweep_differences(payload["sweep"], campaign_sweep):  # the agent's rule, so it can warn before a run
        found.add(NONSTANDARD_SWEEP)
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
    if _max_spread(payload["sweep"]["runs"]) > settings.BENCHHUB_HIGH_SPREAD:
        found.add("high_spread")
    return sorted(found)


def _rows_missing(sweep: dict[str, Any]) -> bool:
    wanted = set(sweep["batch_sizes"])
    return any(run["exit_code"] != 0 or {row["batch_size"] for row in run["rows"]} != wanted for run in sweep["runs"])


def _max_spread(runs: list[dict[str, Any]]) -> float:
    samples: dict[tuple[str, int], list[float]] = defaultdict(list)
    for run in runs:
        for row in run["rows"]:
            samples[(run["variant"], row["batch_size"])].append(row["tg_tps"])
    return max((stats.spread(values) for values in samples.values() if len(values) > 1), default=0.0)
