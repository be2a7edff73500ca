"""Issue 7, item 4: the Celery worker SIGKILLed again and again during a stream of ingests. No
submission is lost or doubled, every touched cell equals a recomputation once the worker is back,
and the time to recovery after each kill is measured (printed; the docs record a run).
BENCHHUB_WORKER_KILLS sets how many kills (default 8)."""

from __future__ import annotations

import os
import signal
import time

import pytest

from benchhub.results.models import Measurement, Submission
from tests.reliability.faults import (
    SIZES,
    PostStream,
    Stack,
    all_refreshed,
    assert_cells_match_a_recomputation,
    refreshed_count,
    register_signers,
    start_web,
    wait_for,
)

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]
KILLS = int(os.environ.get("BENCHHUB_WORKER_KILLS", "8"))


def worker_busy(stack: Stack) -> bool:
    """The worker's current log shows a task received and not yet finished."""
    log = (stack.tmp_path / "worker.log").read_text(errors="replace").rsplit("celery@", 1)[-1]
    return log.count("] received") > log.count("] succeeded") + log.count("] raised")


def test_it_loses_and_doubles_nothing_when_the_worker_is_killed_repeatedly(fault_stack: Stack) -> None:
    start_web(fault_stack)
    fault_stack.start("worker")
    fault_stack.start("beat")
    register_signers(fault_stack)
    recoveries: list[float] = []
    with PostStream(fault_stack, interval_s=0.5) as stream:
        wait_for(lambda: refreshed_count() > 0, 60, "a first refresh")
        for _ in range(KILLS):
            # Kill only while a task is in flight: a kill of an idle worker proves nothing.
            wait_for(lambda: worker_busy(fault_stack), 60, "the worker to take a task", interval=0.01)
            stored_at_kill = [str(pk) for pk in Submission.objects.values_list("id", flat=True)]
            killed_at = time.monotonic()
            fault_stack.kill("worker", signal.SIGKILL)
            time.sleep(1)
            fault_stack.start("worker")
            try:
                wait_for(lambda ids=stored_at_kill: all_refreshed(ids), 120, "recovery after a kill", interval=0.1)
            except AssertionError:
                raise AssertionError(fault_stack.log("worker")) from None
            recoveries.append(time.monotonic() - killed_at)
            time.sleep(1)
    acknowledged = stream.acknowledged_ids()
    print(
        f"{len(acknowledged)} posts, {KILLS} kills, recovery (kill to all earlier cells refreshed) s: "
        f"{[round(r, 1) for r in recoveries]}, longest {max(recoveries):.1f}"
    )
    assert stream.refused() == []
    wait_for(lambda: refreshed_count() == len(acknowledged), 120, "the last refreshes")
    assert {str(pk) for pk in Submission.objects.values_list("id", flat=True)} == acknowledged
    assert Measurement.objects.count() == len(acknowledged) * 2 * len(SIZES)
    assert_cells_match_a_recomputation(len(acknowledged))
