"""Issue 6 target 3: read latencies (server time, in process through Django's handler with DEBUG
off), the EXPLAIN of the slowest query behind each, and the CSV export's memory while streaming."""

from __future__ import annotations

import random
import time
import tracemalloc
from collections.abc import Callable
from typing import Any

from bench import payloads
from bench.figures import percentile, report


def _client() -> Any:
    from django.test import Client

    return Client()


def _timed(get: Callable[[], Any], repeats: int) -> list[float]:
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        answer = get()
        if answer.status_code != 200:
            raise RuntimeError(f"read answered {answer.status_code}")
        if answer.streaming:
            for _chunk in answer.streaming_content:
                pass
        times.append(1000 * (time.perf_counter() - started))
    return times


def _slowest_query(get: Callable[[], Any]) -> tuple[int, float, str, str]:
    """(query count, SQL ms, slowest SQL, its EXPLAIN ANALYZE) of one request."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as captured:
        get()
    queries = [(float(query["time"]), query["sql"]) for query in captured.captured_queries]
    _, sql = max(queries)
    with connection.cursor() as cursor:
        cursor.execute(f"EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) {sql}")
        plan = "\n".join(row[0] for row in cursor.fetchall())
    return len(queries), 1000 * sum(t for t, _ in queries), sql, plan


def _csv_memory(client: Any, url: str) -> tuple[int, float, float]:
    """(rows, seconds, peak MiB of Python allocations while streaming)."""
    tracemalloc.start()
    started = time.perf_counter()
    answer = client.get(url)
    rows = 0
    for chunk in answer.streaming_content:
        rows += chunk.count(b"\n")
    seconds = time.perf_counter() - started
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return rows - 1, seconds, peak / 2**20


def run(repeats: int, explain: bool, csv: bool = True) -> None:
    from benchhub.results.models import LeaderboardCell, Submission

    client = _client()
    total = Submission.objects.count()
    rng = random.Random(3)
    # The busiest chip and quant: the longest lists and the largest cells.
    chip, quant = LeaderboardCell.objects.order_by("-n_submissions").values_list("chip", "quant")[0]
    # And the rarest: a list that walked newest-first submissions of every pair read far more for it.
    rare_chip, rare_quant = (
        LeaderboardCell.objects.filter(n_submissions__gt=0).order_by("n_submissions").values_list("chip", "quant")[0]
    )
    newest = list(Submission.objects.order_by("-received_at").values_list("id", flat=True)[:200])
    ids = [*newest, *Submission.objects.filter(chip_probe(chip)).values_list("id", flat=True)[:200]]
    campaign = payloads.CAMPAIGN

    def measurements_pages() -> Any:
        answer = client.get("/api/v1/measurements/", {"campaign": campaign, "chip": chip, "quant": quant})
        for _ in range(2):
            following = answer.json()["next"]
            if following is None:
                break
            answer = client.get(following.replace("http://testserver", ""))
        return answer

    reads: dict[str, Callable[[], Any]] = {
        "leaderboard API": lambda: client.get("/api/v1/leaderboard/", {"campaign": campaign}),
        "leaderboard API, one quant": lambda: client.get(
            "/api/v1/leaderboard/", {"campaign": campaign, "quant": quant}
        ),
        "home page": lambda: client.get("/"),
        "submission page": lambda: client.get(f"/submissions/{rng.choice(ids)}/"),
        "submission API": lambda: client.get(f"/api/v1/submissions/{rng.choice(ids)}/"),
        "measurements, chip+quant, page 1": lambda: client.get(
            "/api/v1/measurements/", {"campaign": campaign, "chip": chip, "quant": quant}
        ),
        "measurements, chip+quant, pages 1-3": measurements_pages,
        "submissions list, chip+quant": lambda: client.get("/api/v1/submissions/", {"chip": chip, "quant": quant}),
        "submissions list, rarest chip+quant": lambda: client.get(
            "/api/v1/submissions/", {"chip": rare_chip, "quant": rare_quant}
        ),
    }
    lines = [
        f"{total} stored submissions; chip {chip!r}, quant {quant} (rarest: {rare_chip!r}, {rare_quant}); "
        f"{repeats} requests each after one warm-up"
    ]
    plans = []
    for name, get in reads.items():
        get()
        times = _timed(get, repeats)
        lines.append(
            f"{name:38s} p50 {percentile(times, 0.5):7.1f} ms  p95 {percentile(times, 0.95):7.1f} ms  "
            f"max {max(times):7.1f} ms"
        )
        if explain:
            count, sql_ms, sql, plan = _slowest_query(get)
            plans.append(f"-- {name}: {count} queries, {sql_ms:.1f} ms of SQL; the slowest:\n{sql}\n{plan}")
    if csv:
        rows, seconds, peak = _csv_memory(client, f"/api/v1/measurements.csv?campaign={campaign}&quant={quant}")
        lines.append(f"CSV export, one quant: {rows} rows in {seconds:.1f} s, peak Python allocations {peak:.1f} MiB")
    else:
        lines.append("CSV export: not run (--no-csv)")
    report("reads (issue 6 target 3), server time in process, DEBUG off", lines)
    for plan in plans:
        print(plan, flush=True)


def chip_probe(chip: str) -> Any:
    from django.db.models import Q

    return Q(chip=chip)
