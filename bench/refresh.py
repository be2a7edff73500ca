"""Issue 6 targets 2 and 4: the cell refresh one submission costs (what the Celery task does), and
the full rebuild of every cell from the raw envelopes (`manage.py rebuild_cells`) with its peak memory."""

from __future__ import annotations

import os
import random
import resource
import subprocess
import sys
import time

from bench.figures import percentile, report, summary
from bench.stack import ROOT


def run(samples: int) -> None:
    from benchhub.results import cells
    from benchhub.results.models import Submission

    total = Submission.objects.count()
    rng = random.Random(5)
    ids = list(Submission.objects.values_list("id", flat=True)[:5000])
    times, cpu, counts = [], [], []
    for submission_id in rng.sample(ids, min(samples, len(ids))):
        started, cpu_started = time.perf_counter(), time.process_time()
        counts.append(cells.refresh_submission_cells(str(submission_id)))
        times.append(1000 * (time.perf_counter() - started))
        cpu.append(1000 * (time.process_time() - cpu_started))
    report(
        "cell refresh per submission (issue 6 target 2), in process",
        [
            f"{total} stored submissions; {len(times)} submissions' cell groups refreshed one after another, "
            f"{summary(counts)} cells each",
            f"ms per submission: p50 {percentile(times, 0.5):.1f}  p95 {percentile(times, 0.95):.1f}  "
            f"max {max(times):.1f}; of which this process's CPU p50 {percentile(cpu, 0.5):.1f} ms",
        ],
    )


def rebuild(database_url: str) -> None:
    from benchhub.results.models import Submission

    total = Submission.objects.count()
    started = time.perf_counter()
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    done = subprocess.run(
        [sys.executable, "manage.py", "rebuild_cells"],
        cwd=ROOT,
        env={**os.environ, "DATABASE_URL": database_url},
        capture_output=True,
        text=True,
    )
    seconds = time.perf_counter() - started
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    lines = [
        f"{total} stored submissions; manage.py rebuild_cells exit {done.returncode}: {done.stdout.strip()[-200:]}",
        f"wall {seconds:.0f} s ({total / seconds:.0f} submissions/s); peak RSS {peak / 1024:.0f} MiB"
        + ("" if peak > before else " (no higher than an earlier child's)"),
    ]
    if done.returncode:
        lines.append(done.stderr.strip()[-500:])
    report("full rebuild from raw envelopes (issue 6 target 4)", lines)
