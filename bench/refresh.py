"""Issue 6 targets 2 and 4: the cell refresh one submission costs (what the Celery task does), and
the full rebuild of every cell from the raw envelopes (`manage.py rebuild_cells`) with its peak memory."""

from __future__ import annotations

import logging
import os
import resource
import statistics
import subprocess
import sys
import time

from bench.cpu import process_seconds
from bench.figures import percentile, report, summary
from bench.stack import ROOT
from bench.vacuum import autovacuum_stand_in


def run(samples: int) -> None:
    with autovacuum_stand_in(os.environ["DATABASE_URL"]) as stand_in:
        lines = _measure(samples)
    report(
        "cell refresh of an arriving submission's group (issue 6 target 2), in process",
        [*lines, *([stand_in.line()] if stand_in else [])],
    )


def _measure(samples: int) -> list[str]:
    """What the Celery task does when a submission arrives: one new submission ingested in process
    (not timed), then its group's refresh timed (incremental: its rows merged into the stored cells,
    and any cell whose band ran out read in full alone). Then the same groups read in full (what
    moderation and a rebuild pay), for comparison: after the incremental ones, as a full read gives
    its group fresh bands."""
    from django.conf import settings
    from django.test import Client
    from redis import Redis

    from bench.ingest import crowd, register_in_process
    from benchhub.results import cells, tasks
    from benchhub.results.models import Submission

    total = Submission.objects.count()
    bench_crowd = crowd(16, seed=int(time.time()))  # fresh nonces on every run
    client = Client()
    register_in_process(client, bench_crowd, "bench")
    times, cpu, full_times, full_cpu, counts, server, full_server = [], [], [], [], [], [], []
    groups = []
    read_alone = _CellsReadInFull()
    for body in bench_crowd.bodies(samples):
        answer = client.post("/api/v1/submissions/", body, content_type="application/json")
        if answer.status_code != 201:
            raise RuntimeError(f"ingest answered {answer.status_code}: {answer.content[:200]!r}")
        submission = Submission.objects.get(pk=answer.json()["id"])
        groups.append(group := cells.Group.of(submission))
        backend = _server_process()
        started, cpu_started, server_started = time.perf_counter(), time.process_time(), process_seconds(backend)
        counts.append(tasks.refresh_group_cells(*group.task_args()))  # the task's own code, in process
        times.append(1000 * (time.perf_counter() - started))
        cpu.append(1000 * (time.process_time() - cpu_started))
        server.append(1000 * (process_seconds(backend) - server_started))
    read_alone.stop()
    for group in groups:
        backend = _server_process()
        started, cpu_started, server_started = time.perf_counter(), time.process_time(), process_seconds(backend)
        cells.refresh_group(group, full=True)
        full_times.append(1000 * (time.perf_counter() - started))
        full_cpu.append(1000 * (time.process_time() - cpu_started))
        full_server.append(1000 * (process_seconds(backend) - server_started))
    Redis.from_url(settings.REDIS_URL).delete(settings.CELERY_TASK_DEFAULT_QUEUE)  # no worker consumes it
    submissions_per_group = total / max(1, _group_count())
    return [
        f"{total} stored submissions (~{submissions_per_group:.0f} per group); {len(times)} submissions "
        f"ingested one after another, each group then refreshed, {summary(counts)} cells each",
        f"incremental (the worker's task): ms p50 {percentile(times, 0.5):.1f}  "
        f"p95 {percentile(times, 0.95):.1f}  max {max(times):.1f}; this process's CPU p50 "
        f"{percentile(cpu, 0.5):.1f} ms, its PostgreSQL process's CPU mean {statistics.fmean(server):.1f} ms; "
        f"{read_alone.cells} cell(s) read in full in {read_alone.refreshes} refresh(es), their bands run out",
        f"full read of the same groups:    ms p50 {percentile(full_times, 0.5):.1f}  "
        f"p95 {percentile(full_times, 0.95):.1f}  max {max(full_times):.1f}; this process's CPU p50 "
        f"{percentile(full_cpu, 0.5):.1f} ms, its PostgreSQL process's CPU mean "
        f"{statistics.fmean(full_server):.1f} ms",
        "  (the server's CPU is counted in ticks of 10 ms: a mean over many refreshes, not a p50)",
    ]


class _CellsReadInFull(logging.Handler):
    """Counts what cells.refresh_group logs of the cells it read in full because their bands ran out."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.cells = self.refreshes = 0
        self.logger = logging.getLogger("benchhub.results.cells")
        self.level_before = self.logger.level
        self.logger.setLevel(logging.DEBUG)
        self.logger.addHandler(self)

    def emit(self, record: logging.LogRecord) -> None:
        if "bands no longer serving them" in record.msg and isinstance(record.args, tuple):
            self.refreshes += 1
            self.cells += int(str(record.args[1]))

    def stop(self) -> None:
        self.logger.removeHandler(self)
        self.logger.setLevel(self.level_before)


def _server_process() -> str:
    """The pid of the PostgreSQL process serving this one's connection (PostgreSQL runs here)."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        return str(cursor.fetchone()[0])


def _group_count() -> int:
    from benchhub.results.models import LeaderboardCell

    return (
        LeaderboardCell.objects.order_by().values_list("campaign_id", "chip", "gpu_cores", "quant").distinct().count()
    )


def rebuild(database_url: str, all_rows: bool = False) -> None:
    from benchhub.results.models import Submission

    total = Submission.objects.count()
    started = time.perf_counter()
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    before, cpu_before = children.ru_maxrss, children.ru_utime + children.ru_stime
    done = subprocess.run(
        [sys.executable, "manage.py", "rebuild_cells", *(["--all-rows"] if all_rows else [])],
        cwd=ROOT,
        env={**os.environ, "DATABASE_URL": database_url},
        capture_output=True,
        text=True,
    )
    seconds = time.perf_counter() - started
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    peak, cpu = children.ru_maxrss, children.ru_utime + children.ru_stime - cpu_before
    command = "manage.py rebuild_cells" + (" --all-rows" if all_rows else "")
    lines = [
        f"{total} stored submissions; {command} exit {done.returncode}",
        *done.stdout.strip().splitlines()[-3:],
        f"wall {seconds:.0f} s ({total / seconds:.0f} submissions/s); CPU of the command and its workers "
        f"{cpu:.0f} s; peak RSS {peak / 1024:.0f} MiB"
        + ("" if peak > before else " (no higher than an earlier child's)"),
    ]
    if done.returncode:
        lines.append(done.stderr.strip()[-500:])
    report("full rebuild from raw envelopes (issue 6 target 4)", lines)
