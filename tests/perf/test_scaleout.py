"""`python -m bench scaleout`'s logic, not its timings: a tiny run (N = 1, 2, a few seconds each) on
the real PostgreSQL and Redis, and the rules that turn reads and samples into its figures."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

from bench.scaleout import Poll, Sample, cpu_cores, first_shown, spread, table_lines, tree_cpu

ROOT = Path(__file__).resolve().parents[2]
INF = float("inf")


def test_a_tiny_run_measures_every_step(tmp_path: Path) -> None:
    redis = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/9")
    command = [sys.executable, "-m", "bench", "scaleout", "--redis", redis, "--steps", "1,2", "--size", "60"]
    command += ["--processes", "1", "--clients", "2", "--seconds", "3", "--drain", "30", "--out", str(tmp_path)]
    subprocess.run(command, check=True, cwd=ROOT, timeout=540)
    document = json.loads((tmp_path / "scaleout.json").read_text())
    assert [step["n"] for step in document["steps"]] == [1, 2]
    assert document["skipped"] == []
    for step in document["steps"]:
        assert step["web_workers"] == step["worker_concurrency"] == step["n"]
        assert step["accepted"] > 0 and step["refused"] == {}
        assert 0 < step["accepted_per_s"] <= step["accepted"] / 3
        # Every accepted submission was refreshed, and (but the ~1% of degenerate baselines) shown.
        assert step["refreshed_s"]["n"] == step["accepted"] and step["refreshed_s"]["unseen"] == 0
        assert 0 <= step["refreshed_s"]["p50"] <= step["refreshed_s"]["p95"] <= step["refreshed_s"]["max"]
        assert step["shown_s"]["n"] >= step["accepted"] * 0.8 and step["shown_s"]["unseen"] == 0
        assert step["refreshed_s"]["p50"] <= step["shown_s"]["p50"]
        assert step["cpu_cores"]["web"] > 0 and step["cpu_cores"]["worker"] > 0
        assert step["cpu_cores"]["machine"] > 0
    assert len(table_lines(document)) == 2 + 2


def test_a_submission_shows_at_the_first_read_after_its_201_that_counts_it() -> None:
    cell = ("Apple M2", 10, "ab" * 32)
    polls = [Poll(1.0, {cell: 5}), Poll(2.0, {cell: 6}), Poll(3.0, {cell: 7}), Poll(4.0, {})]
    times = [poll.at for poll in polls]
    assert first_shown(polls, times, 0.5, cell, 6) == 2.0
    assert first_shown(polls, times, 2.5, cell, 6) == 3.0  # a read before the 201 never shows it
    assert first_shown(polls, times, 0.5, cell, 8) == INF
    assert first_shown(polls, times, 0.5, ("Apple M1", 8, "cd" * 32), 1) == INF


def test_a_submission_never_seen_makes_the_rank_it_reaches_unknown() -> None:
    values = [0.1 * index for index in range(1, 20)] + [INF]
    figures = spread(values)
    assert figures["p50"] == 1.0 and figures["p95"] == 1.9 and figures["max"] == 1.9
    assert figures["n"] == 20 and figures["unseen"] == 1
    figures = spread([0.1] * 10 + [INF] * 2)
    assert figures["p95"] is None and figures["p50"] == 0.1
    assert spread([])["p50"] is None


def test_a_parts_cpu_is_its_tree_and_survives_its_children_exiting() -> None:
    # pid -> (parent, CPU s of itself and its reaped children)
    before = {10: (1, 1.0), 11: (10, 2.0), 12: (11, 3.0), 20: (1, 5.0), 30: (10, 7.0)}
    assert tree_cpu(before, {10}) == 13.0
    assert tree_cpu(before, {10}, exclude=frozenset({30})) == 6.0
    after = {10: (1, 1.0), 11: (10, 5.5), 20: (1, 5.0), 30: (10, 7.0)}  # 12 exited, reaped by 11
    assert tree_cpu(after, {10}) == 13.5
    assert tree_cpu(after, {99}) == 0.0


def test_cores_are_cpu_seconds_over_the_wall_time_between_samples() -> None:
    parts = {"web": 1.0, "worker": 2.0, "beat": 0.0, "clients": 0.5, "machine": 10.0}
    first = Sample(100.0, {**parts, "postgres": 1.0}, Counter())
    last = Sample(102.0, {**{k: v + 3.0 for k, v in parts.items()}}, Counter())
    cores = cpu_cores([first, last])
    assert cores["web"] == cores["machine"] == 1.5
    assert cores["postgres"] is None and cores["redis"] is None  # not seen in both samples


def test_the_docs_table_is_the_device_runs_figures() -> None:
    document = json.loads((ROOT / "tests" / "perf" / "fixtures" / "scaleout.json").read_text())
    docs = (ROOT / "docs" / "performance.md").read_text()
    assert [step["n"] for step in document["steps"]] == [1, 2, 4, 8]
    for line in table_lines(document):
        assert line in docs
