"""One HTTP client process of the ingest benchmark: keep-alive POSTs, one after another."""

from __future__ import annotations

import http.client
import time


def post_bodies(args: tuple[int, list[bytes], float]) -> list[tuple[float, int]]:
    """Waits for the shared start time so the clients start together; returns (seconds, status) per POST."""
    port, bodies, start_at = args
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    time.sleep(max(0.0, start_at - time.time()))
    results = []
    for body in bodies:
        started = time.perf_counter()
        connection.request("POST", "/api/v1/submissions/", body=body, headers={"Content-Type": "application/json"})
        answer = connection.getresponse()
        answer.read()
        results.append((time.perf_counter() - started, answer.status))
    connection.close()
    return results
