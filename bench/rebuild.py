"""`manage.py rebuild_cells` (target 4): every submission's measurements derived again from its raw
envelope, then every group's cells recomputed; timed as a process of its own, with its peak memory."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import time

from bench.figures import report
from bench.stack import ROOT


def run() -> None:
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
    report(
        "rebuild_cells (target 4)",
        [
            f"{submissions} submissions, {measurements} measurements, {LeaderboardCell.objects.count()} cells",
            f"wall {seconds:.0f} s ({seconds / 60:.1f} min), peak RSS {peak_mib:.0f} MiB",
            f"its output: {done.stdout.strip().splitlines()[-2:]}",
        ],
    )
