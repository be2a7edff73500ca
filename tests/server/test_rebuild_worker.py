"""A rebuild worker's task runs with the cycle collector paused, and the collector is back on after
it, whether the task returned or raised (a worker left without it would keep every cycle it made)."""

from __future__ import annotations

import gc
from typing import Any

import pytest
from django.db import connection

from benchhub.results import rebuild_worker

TASKS = __name__


def collector_state(item: int) -> int:
    """The task: 1 when the collector is on while it runs."""
    return int(gc.isenabled())


def failing(item: int) -> int:
    raise RuntimeError(f"task {item} failed")


def database() -> dict[str, Any]:
    return {name: connection.settings_dict[name] for name in ("NAME", "USER", "PASSWORD", "HOST", "PORT")}


def test_a_task_runs_with_the_collector_paused_and_leaves_it_on() -> None:
    assert gc.isenabled()
    assert rebuild_worker.run(database(), f"{TASKS}.collector_state", 0) == 0
    assert gc.isenabled()


def test_a_failing_task_leaves_the_collector_on() -> None:
    with pytest.raises(RuntimeError, match="task 7 failed"):
        rebuild_worker.run(database(), f"{TASKS}.failing", 7)
    assert gc.isenabled()
