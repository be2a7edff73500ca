"""`manage.py rebuild_cells` (target 4): every group's cells recomputed through the refresh's own
code, timed as a process of its own with its peak memory; then the largest group's refresh timed
in process (what grows with a group: `bench group` times one of 10,000 machines)."""

from __future__ import annotations

import os
import resource
import statistics
import subprocess
import sys
import time

from bench.figures import report
from bench.stack import ROOT

REPEATS = 5


def run() -> None:
    from django.db.models import Count

    from benchhub.results import board, cells
    from benchhub.results.models import LeaderboardCell, Measurement, Submission

    submissions, measurements = Submission.objects.count(), Measurement.objects.count()
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "manage.py", "rebuild_cells"], cwd=ROOT, env=os.environ, capture_output=True, text=True
    )
    seconds = time.perf_counter() - started
    if done.returncode:
        raise RuntimeError(f"rebuild_cells failed: {done.stderr[-2000:]}")
    peak_mib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    groups = len(cells.all_groups())
    largest = Measurement.objects.values(*board.GROUP_FIELDS).annotate(rows=Count("id")).order_by("-rows").first() or {}
    lines = [
        f"{submissions} submissions, {measurements} measurements, {LeaderboardCell.objects.count()} cells",
        f"wall {seconds:.1f} s, {seconds / max(groups, 1) * 1000:.0f} ms a group ({groups} groups), "
        f"peak RSS {peak_mib:.0f} MiB",
        f"its output: {done.stdout.strip().splitlines()[-1:]}",
        "previous: 602 s at 100,600 submissions (re-derivation included, now manage.py rederive_measurements)",
    ]
    if largest:
        rows = largest.pop("rows")
        group = board.Group(*(largest[name] for name in board.GROUP_FIELDS))
        times = []
        for _ in range(REPEATS):
            started = time.perf_counter()
            cells.refresh_group(group)
            times.append(time.perf_counter() - started)
        lines.append(
            f"one refresh of the largest group ({rows} rows): median {statistics.median(times) * 1000:.1f} ms "
            f"(spread {min(times) * 1000:.1f}-{max(times) * 1000:.1f}, n={REPEATS}); previous: 109 ms (84-142)"
        )
    report("rebuild_cells (target 4)", lines)
