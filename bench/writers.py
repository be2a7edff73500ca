"""The ingest's CPU per submission with its two row writers, COPY and the ORM, in one process and
alternating blocks (A B B A), so both see the same machine: the figure behind storage.store_rows."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any

from bench.figures import report
from bench.ingest import crowd, register_in_process


def run(count: int = 400) -> None:
    from django.test import Client

    from benchhub.results import storage

    writers: dict[str, Callable[[Any, dict[str, Any]], None]] = {
        "COPY": storage.store_rows,
        "ORM": lambda submission, payload: storage.store_many([(submission, payload)]),
    }
    bench_crowd = crowd(16, seed=time.time_ns())
    client = Client()
    register_in_process(client, bench_crowd, f"writers-{time.time_ns()}")
    bodies = bench_crowd.bodies(count)
    order = ["COPY", "ORM", "ORM", "COPY"] * 2
    per_block = len(bodies) // len(order)
    cpu: dict[str, list[float]] = {name: [] for name in writers}
    wall: dict[str, list[float]] = {name: [] for name in writers}
    try:
        for block, name in enumerate(order):
            storage.store_rows = writers[name]  # type: ignore[assignment]
            chunk = bodies[block * per_block : (block + 1) * per_block]
            started, cpu_started = time.perf_counter(), time.process_time()
            for body in chunk:
                answer = client.post("/api/v1/submissions/", body, content_type="application/json")
                if answer.status_code != 201:
                    raise RuntimeError(f"ingest answered {answer.status_code}: {answer.content[:200]!r}")
            cpu[name].append(1000 * (time.process_time() - cpu_started) / len(chunk))
            wall[name].append(1000 * (time.perf_counter() - started) / len(chunk))
    finally:
        storage.store_rows = writers["COPY"]  # type: ignore[assignment]
    report(
        "ingest CPU per submission by row writer (in process, no HTTP; blocks A B B A)",
        [
            f"{name}: CPU {statistics.median(cpu[name]):.1f} ms (blocks {', '.join(f'{v:.1f}' for v in cpu[name])}), "
            f"wall {statistics.median(wall[name]):.1f} ms"
            for name in writers
        ],
    )
