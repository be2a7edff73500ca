"""The bench's own logic, not its timings: the steps of `python -m bench all` and its figures."""

from __future__ import annotations

from bench.__main__ import arguments, steps
from bench.figures import percentile, summary


def test_it_runs_every_step_on_a_cells_v2_database() -> None:
    options = arguments().parse_args(["all", "--size", "2000"])
    runs = steps(options)
    assert [run[0] for run in runs] == ["state", "ingest", "latency", "reads", "rebuild"]
    databases = {run[run.index("--database") + 1].rsplit("/", 1)[1] for run in runs}
    assert databases == {"bh_perf_after_2k", "bh_perf_after_ingest"}


def test_it_takes_the_nearest_rank_percentile() -> None:
    values = [float(value) for value in range(1, 101)]
    assert percentile(values, 0.95) == 95.0
    assert percentile([3.0], 0.5) == 3.0
    assert summary([1.0, 3.0, 2.0]) == "2 (spread 1-3, n=3)"
