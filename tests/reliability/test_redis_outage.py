"""Issue 7, item 5: Redis (broker and throttle cache) down for 30 s during a stream of posts.
Every post is still answered 2xx, the backlog drains once Redis is back, and the cells equal a
recomputation. BENCHHUB_REDIS_OUTAGE_S sets the outage (default 30)."""

from __future__ import annotations

import os
import time

import pytest

from benchhub.results.models import Submission
from tests.reliability.faults import (
    OwnRedis,
    PostStream,
    RestartPolicy,
    Stack,
    assert_cells_match_a_recomputation,
    refreshed_count,
    register_signers,
    start_web,
    wait_for,
)

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]
OUTAGE_S = float(os.environ.get("BENCHHUB_REDIS_OUTAGE_S", "30"))


def test_it_answers_every_post_while_redis_is_down_and_drains_the_backlog_after(
    fault_stack: Stack, own_redis: OwnRedis
) -> None:
    start_web(fault_stack)
    fault_stack.start("worker")
    fault_stack.start("beat")
    register_signers(fault_stack)
    with RestartPolicy(fault_stack, ("worker", "beat")) as policy:
        with PostStream(fault_stack) as stream:
            time.sleep(5)
            own_redis.kill()
            down_at = time.monotonic()
            time.sleep(OUTAGE_S)
            own_redis.start()
            back_at = time.monotonic()
            time.sleep(5)
        during = [answer for answer in stream.answers if down_at <= answer[0] < back_at]
        print(f"posts: {len(stream.answers)}, {len(during)} while Redis was down; refused {stream.refused()[:5]}")
        assert len(during) >= OUTAGE_S / 2, "too few posts landed inside the outage to prove anything"
        assert stream.refused() == []
        acknowledged = stream.acknowledged_ids()
        assert {str(pk) for pk in Submission.objects.values_list("id", flat=True)} == acknowledged
        try:
            wait_for(lambda: refreshed_count() == len(acknowledged), 180, "the backlog to drain", interval=0.5)
        except AssertionError:
            raise AssertionError(fault_stack.log("worker") + fault_stack.log("beat")) from None
        drained_s = time.monotonic() - back_at
    print(f"backlog of {len(acknowledged)} drained {drained_s:.1f} s after Redis returned; restarts: {policy.restarts}")
    assert_cells_match_a_recomputation(len(acknowledged))
