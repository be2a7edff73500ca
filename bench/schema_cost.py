"""`python -m bench.schema_cost`: what validating one submission costs with each JSON-schema
library, against the load users bring (tens of submissions a minute). docs/performance.md quotes it.

The service and the agent use jsonschema alone; fastjsonschema is measured only where it is
installed (`.venv/bin/pip install fastjsonschema`), to show what a second library would buy.
The payload is the bench's realistic one (3 variants x 9 batch sizes x 2 interleaved reps, with
correctness and generation checks). The two libraries alternate in rounds, best of each round kept.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

import jsonschema
from benchhub_protocol import schema

from bench.payloads import payload

ROUNDS, CALLS = 7, 50


def best_ms(check: Callable[[Any], Any], body: Any) -> float:
    best = float("inf")
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(CALLS):
            check(body)
        best = min(best, (time.perf_counter() - start) / CALLS)
    return best * 1000


def import_ms(module: str) -> float:
    """A fresh interpreter's import of one module, best of three (-X importtime would count children twice)."""
    code = f"import time; t = time.perf_counter(); import {module}; print(time.perf_counter() - t)"
    runs = [
        float(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout)
        for _ in range(3)
    ]
    return min(runs) * 1000


def main() -> None:
    from bench.payloads import VariantSpec

    variants = [VariantSpec(name, [], {}) for name in ("upstream", "01", "01+02")]
    body = json.loads(json.dumps(payload(random.Random(1), variants)))
    checks: dict[str, Callable[[Any], Any]] = {
        "jsonschema": jsonschema.Draft202012Validator(schema.SUBMISSION_SCHEMA).validate,
        "validate_submission": schema.validate_submission,  # what ingest runs: the schema and the text rules
    }
    try:
        import fastjsonschema
    except ImportError:
        print("fastjsonschema is not installed: measuring jsonschema alone")
    else:
        checks["fastjsonschema"] = fastjsonschema.compile(schema.SUBMISSION_SCHEMA)
    sides: dict[str, list[float]] = {name: [] for name in checks}
    for _ in range(ROUNDS):
        for name, check in checks.items():
            sides[name].append(best_ms(check, body))
    size = len(json.dumps(body))
    print(f"one submission ({size:,} bytes of JSON), ms per validation, median of {ROUNDS} alternated rounds:")
    for name, values in sides.items():
        values.sort()
        print(f"  {name:19} {values[len(values) // 2]:.3f} (min {values[0]:.3f}, max {values[-1]:.3f})")
    print(f"  import jsonschema: {import_ms('jsonschema'):.0f} ms")
    print(f"load average {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
