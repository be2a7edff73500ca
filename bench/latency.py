"""From a 201 to the cell showing it on the leaderboard API (target 2): clients post at a steady
rate to the production commands on a large state while another process's loop reads the API.

A submission shows once its group's baseline cell at batch size 1 counts at least as many
submissions as that cell's counted measurements in the database right after its 201: a refresh
reads one snapshot, and a snapshot taken before the submission committed holds fewer rows than
that (the counts only grow while the bench runs), so the count reaching it means the submission
is in. Measured twice: in the database (cells_refreshed_at) and on the API, whose boards may be
served up to BENCHHUB_BOARD_MAX_STALENESS_SECONDS behind their cells (readcache.py)."""

from __future__ import annotations

import http.client
import json
import threading
import time
from dataclasses import dataclass

from bench import payloads
from bench.figures import percentile, report, summary
from bench.ingest import crowd, register_over_http
from bench.stack import Stack, service_env

BATCH_SIZE = 1
SENDERS = 4  # a POST takes longer than 1/rate on 2 busy cores: one client alone falls behind


@dataclass
class Pending:
    submission_id: str
    chip: str
    gpu_cores: int
    model_sha256: str
    needed: int  # the cell's count that includes this submission
    created_s: float  # monotonic time of the 201
    refreshed_s: float | None = None
    shown_s: float | None = None


def needed_count(submission_id: str, baseline: str) -> tuple[str, int, str, int]:
    """(chip, gpu_cores, model sha256, counted measurements of the watched cell) right after the 201."""
    from benchhub.results.models import Measurement, Submission

    submission = Submission.objects.get(pk=submission_id)
    counted = Measurement.objects.filter(
        campaign_id=submission.campaign_id,
        chip=submission.chip,
        gpu_cores=submission.gpu_cores,
        model_sha256=submission.model_sha256,
        variant_name=baseline,
        batch_size=BATCH_SIZE,
        excluded_reason="",
        speedup__isnull=False,
    )
    return submission.chip, int(submission.gpu_cores or 0), submission.model_sha256, counted.count()


def shown_counts(connection: http.client.HTTPConnection, baseline: str) -> dict[tuple[str, int, str], int]:
    """The watched cells of every group, from one read of the campaign's board at that batch size."""
    connection.request("GET", f"/api/v1/leaderboard/?campaign={payloads.CAMPAIGN}&batch_size={BATCH_SIZE}")
    answer = connection.getresponse()
    rows = json.loads(answer.read())["rows"]
    return {
        (row["chip"], row["gpu_cores"], row["model_sha256"]): row["n_submissions"]
        for row in rows
        if row["variant"] == baseline
    }


def run(database_url: str, redis_url: str, *, rate: float, seconds: int, web_workers: int) -> None:
    from benchhub.results.models import Campaign, Submission

    baseline = Campaign.objects.get(slug=payloads.CAMPAIGN).baseline
    bench_crowd = crowd(16, seed=int(time.time()))
    count = int(rate * seconds)
    bodies = bench_crowd.bodies(count)
    stored = Submission.objects.count()
    stack = Stack(service_env(database_url, redis_url), web_workers, worker_concurrency=2)
    pending: list[Pending] = []
    refused = 0
    lock = threading.Lock()
    sending = threading.Event()
    sending.set()
    poll_gaps: list[float] = []

    def watch() -> None:
        """Read the API and the database in a loop until every submission showed on both."""
        connection = http.client.HTTPConnection("127.0.0.1", stack.port, timeout=60)
        last = time.monotonic()
        while sending.is_set() or any(p.shown_s is None or p.refreshed_s is None for p in pending):
            counts = shown_counts(connection, baseline)
            now = time.monotonic()
            poll_gaps.append(now - last)
            last = now
            with lock:
                waiting = [p for p in pending if p.shown_s is None or p.refreshed_s is None]
            refreshed = {
                str(pk)
                for pk in Submission.objects.filter(
                    pk__in=[p.submission_id for p in waiting], cells_refreshed_at__isnull=False
                ).values_list("pk", flat=True)
            }
            for p in waiting:
                if p.refreshed_s is None and p.submission_id in refreshed:
                    p.refreshed_s = now
                if p.shown_s is None and counts.get((p.chip, p.gpu_cores, p.model_sha256), 0) >= p.needed:
                    p.shown_s = now

    def send(first: int, started: float) -> None:
        """Every SENDERS-th body at its time on the shared schedule: one slow answer delays no other."""
        nonlocal refused
        connection = http.client.HTTPConnection("127.0.0.1", stack.port, timeout=60)
        for index in range(first, len(bodies), SENDERS):
            time.sleep(max(0.0, started + index / rate - time.monotonic()))
            connection.request(
                "POST", "/api/v1/submissions/", body=bodies[index], headers={"Content-Type": "application/json"}
            )
            answer = connection.getresponse()
            created_s = time.monotonic()
            answered = json.loads(answer.read())
            if answer.status != 201:
                with lock:
                    refused += 1
                continue
            chip, gpu_cores, model_sha256, needed = needed_count(answered["id"], baseline)
            with lock:
                pending.append(Pending(answered["id"], chip, gpu_cores, model_sha256, needed, created_s))

    stack.start()
    try:
        register_over_http(stack.base, bench_crowd.signers)
        watcher = threading.Thread(target=watch)
        watcher.start()
        started = time.monotonic()
        senders = [threading.Thread(target=send, args=(index, started)) for index in range(SENDERS)]
        for sender in senders:
            sender.start()
        for sender in senders:
            sender.join()
        sent_rate = len(bodies) / (time.monotonic() - started)
        sending.clear()
        watcher.join(timeout=120)
    finally:
        sending.clear()
        stack.stop()
    shown = [p.shown_s - p.created_s for p in pending if p.shown_s is not None]
    refreshed = [p.refreshed_s - p.created_s for p in pending if p.refreshed_s is not None]
    report(
        "from a 201 to the cell on the leaderboard API (target 2)",
        [
            f"{stored} stored submissions; {len(bodies)} posted at {sent_rate:.1f}/s by {SENDERS} clients "
            f"for {seconds} s; "
            f"gunicorn --workers {web_workers}, a Celery worker (--concurrency 2) and beat; {refused} refused",
            f"201 -> cells refreshed (database): p50 {percentile(refreshed, 0.5):.2f} s, "
            f"p95 {percentile(refreshed, 0.95):.2f} s, max {max(refreshed):.2f} s (n={len(refreshed)})",
            f"201 -> shown on the API:           p50 {percentile(shown, 0.5):.2f} s, "
            f"p95 {percentile(shown, 0.95):.2f} s, max {max(shown):.2f} s (n={len(shown)})",
            f"API poll interval s: {summary(poll_gaps)} (the resolution of both figures)",
        ],
    )
