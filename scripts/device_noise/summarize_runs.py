"""Summarise A/A agent runs from their payloads, by the shipped rule (benchhub_protocol.rounds):

    python scripts/device_noise/summarize_runs.py tests/agent/fixtures/noise-by-size/aa-run1-payload.json [...]

Per payload: whole cycles, sweep seconds, stop_reason, order_seed, the per-process spread, raw and the
residual the rule uses (bench.stopping.measured_spreads; the residual's range over batch sizes too), each
cell's verdict as the agent prints it (report.cells), and the flags. Run from the repository root."""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path
from typing import Any

from benchhub_agent import report
from benchhub_protocol.cycles import whole_cycles
from benchhub_protocol.rounds import _balanced_spread, cycle_runs

from bench.stopping import measured_spreads


def summary(payload: dict[str, Any]) -> dict[str, Any]:
    sweep = payload["sweep"]
    counted = cycle_runs(sweep["runs"])
    spreads = [found[0] for size in sweep["batch_sizes"] if (found := _balanced_spread(counted, size))]
    rows = [row for row in report.cells(payload) if row["variant"] != payload["variants"][0]["name"]]
    return {
        "cycles": len(whole_cycles(sweep["runs"])),
        "rounds": len({run["rep"] for run in sweep["runs"]}),
        "sweep_seconds": sweep["stop"].get("seconds"),
        "max_seconds": sweep["stop"].get("max_seconds"),
        "max_rounds": sweep["stop"].get("max_rounds"),
        "stop_reason": sweep.get("stop_reason"),
        "order_seed": sweep.get("order_seed"),
        "spread_raw_and_residual": measured_spreads(payload),
        "spread_range": [min(spreads), max(spreads)] if spreads else None,
        "verdicts": dict(Counter(row["verdict"] for row in rows)),
        "ratios": [min(row["speedup"] for row in rows), max(row["speedup"] for row in rows)],
        "flags": payload.get("flags"),
        "machine": payload["machine"].get("gpu") or payload["machine"].get("chip"),
    }


if __name__ == "__main__":
    for name in sys.argv[1:]:
        print(name, json.dumps(summary(json.loads(Path(name).read_text())), indent=1))
