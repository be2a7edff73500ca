"""Read latencies (target 3): server time in process through Django's handler, DEBUG off, on the
state at hand; and the CSV export's memory while it streams.

The boards (leaderboard API, home and chip pages) keep their rendering in the shared cache while
their cells do not change (readcache.py): the repeated reads are those cache hits, and each board's
first read after the cache is emptied, a full render, is printed beside them."""

from __future__ import annotations

import random
import time
import tracemalloc
from collections.abc import Callable
from typing import Any

from bench import payloads
from bench.figures import percentile, report


def timed(get: Callable[[], Any]) -> float:
    started = time.perf_counter()
    answer = get()
    if answer.status_code != 200:
        raise RuntimeError(f"read answered {answer.status_code}")
    if answer.streaming:
        for _chunk in answer.streaming_content:
            pass
    return 1000 * (time.perf_counter() - started)


def csv_memory(client: Any, url: str) -> tuple[int, float, float]:
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
    return rows - 2, seconds, peak / 2**20  # less the header and the "# complete" line


def run(repeats: int, csv: bool) -> None:
    from django.core.cache import cache
    from django.test import Client

    from benchhub.results.board import chip_slug
    from benchhub.results.models import LeaderboardCell, Submission

    client = Client()
    rng = random.Random(3)
    campaign = payloads.CAMPAIGN
    # The busiest group: the longest lists and the largest cells.
    chip, cores, model, quant = (
        LeaderboardCell.objects.filter(campaign__slug=campaign)
        .order_by("-n_submissions")
        .values_list("chip", "gpu_cores", "model_sha256", "quant")[0]
    )
    ids = list(Submission.objects.order_by("-received_at").values_list("id", flat=True)[:200])
    one_group = {"campaign": campaign, "chip": chip, "gpu_cores": str(cores), "model": model}
    reads: dict[str, Callable[[], Any]] = {
        "leaderboard API, campaign": lambda: client.get("/api/v1/leaderboard/", {"campaign": campaign}),
        "leaderboard API, one model": lambda: client.get(
            "/api/v1/leaderboard/", {"campaign": campaign, "model": model}
        ),
        "leaderboard API, one group": lambda: client.get("/api/v1/leaderboard/", one_group),
        "home page": lambda: client.get("/"),
        "chip page": lambda: client.get(f"/chips/{chip_slug(chip, cores)}/"),
        "submission page": lambda: client.get(f"/submissions/{rng.choice(ids)}/"),
        "submissions list, chip+quant": lambda: client.get("/api/v1/submissions/", {"chip": chip, "quant": quant}),
        "measurements list, one group": lambda: client.get("/api/v1/measurements/", one_group),
    }
    lines = [
        f"{Submission.objects.count()} stored submissions, {LeaderboardCell.objects.count()} cells; busiest group "
        f"{chip!r} {cores} cores, {quant}; {repeats} requests each after the first (a full render where cached)"
    ]
    cache.clear()
    for name, get in reads.items():
        first = timed(get)
        times = [timed(get) for _ in range(repeats)]
        lines.append(
            f"{name:32s} p50 {percentile(times, 0.5):7.1f} ms  p95 {percentile(times, 0.95):7.1f} ms  "
            f"max {max(times):7.1f} ms  first {first:7.1f} ms"
        )
    if csv:
        rows, seconds, peak = csv_memory(client, f"/api/v1/measurements.csv?campaign={campaign}&quant={quant}")
        lines.append(f"CSV export, one quant: {rows} rows in {seconds:.1f} s, peak Python allocations {peak:.1f} MiB")
        rows, seconds, peak = csv_memory(client, f"/api/v1/measurements.csv?campaign={campaign}&chip={chip}")
        lines.append(f"CSV export, one chip:  {rows} rows in {seconds:.1f} s, peak Python allocations {peak:.1f} MiB")
    report("reads (target 3), server time in process, DEBUG off", lines)
