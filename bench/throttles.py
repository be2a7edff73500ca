"""What the two ingest throttles cost a request, and whether they hold under concurrency.

Each check runs against the Redis the service uses (the bench's db), as the web worker runs it:
a fresh throttle object per request, the shared counters, one client address or key. The cost of a
check is printed against the number of requests already counted in its window (the bench's own
rates let every request through, so its one address's window grows to every request of the hour;
in service a window holds at most the rate, 120 an hour per address). The race: 16 threads of one
process behind a barrier pass one address throttle limited to 5 an hour; more than 5 let through
is a lost update between the read and the write of the counters.
"""

from __future__ import annotations

import os
import statistics
import threading
import time

from bench.figures import report, summary

COUNTED = (100, 1_000, 5_000)
BLOCKS = 5
CHECKS_PER_BLOCK = 200
RACERS = 16
RACE_LIMIT = 5
RACE_TRIALS = 10


def _setup(redis: str) -> None:
    os.environ["REDIS_URL"] = redis
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "benchhub.settings")
    os.environ.setdefault("DJANGO_SECRET_KEY", "bench-in-process-only")
    os.environ["BENCHHUB_THROTTLE_ADDRESS"] = "100000000/hour"
    import django

    django.setup()


def _request(address: str):  # type: ignore[no-untyped-def]
    from django.test import RequestFactory
    from rest_framework.request import Request

    return Request(RequestFactory().post("/api/v1/submissions", REMOTE_ADDR=address))


def _cost_lines() -> list[str]:
    from django.core.cache import cache

    from benchhub.api.throttling import AddressThrottle

    lines = []
    for counted in COUNTED:
        cache.clear()
        request = _request("192.0.2.10")
        for _ in range(counted):
            assert AddressThrottle().allow_request(request, None)  # type: ignore[arg-type]
        cpu, wall = [], []
        for _ in range(BLOCKS):
            cpu_start, wall_start = time.process_time(), time.perf_counter()
            for _ in range(CHECKS_PER_BLOCK):
                AddressThrottle().allow_request(request, None)  # type: ignore[arg-type]
            cpu.append((time.process_time() - cpu_start) / CHECKS_PER_BLOCK * 1e6)
            wall.append((time.perf_counter() - wall_start) / CHECKS_PER_BLOCK * 1e6)
        lines.append(
            f"{counted:>5} counted in the window: CPU {summary(cpu)} µs a check, wall {summary(wall)} µs "
            f"({BLOCKS} blocks of {CHECKS_PER_BLOCK})"
        )
    cache.clear()
    return lines


def _let_through_at_once(request: object) -> int:
    from benchhub.api.throttling import AddressThrottle

    barrier = threading.Barrier(RACERS)
    answers: list[bool] = []

    def race() -> None:
        barrier.wait()
        answers.append(AddressThrottle().allow_request(request, None))  # type: ignore[arg-type]

    threads = [threading.Thread(target=race) for _ in range(RACERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return sum(answers)


def _race_lines() -> list[str]:
    from django.conf import settings
    from django.core.cache import cache

    settings.BENCHHUB_THROTTLE_ADDRESS = f"{RACE_LIMIT}/hour"
    let_through = []
    for trial in range(RACE_TRIALS):
        cache.clear()
        let_through.append(_let_through_at_once(_request(f"198.51.100.{trial}")))
    cache.clear()
    return [
        f"{RACERS} threads at once, limit {RACE_LIMIT} an hour, {RACE_TRIALS} trials: let through "
        f"{let_through} (median {statistics.median(let_through):g}; {RACE_LIMIT} is right)"
    ]


def run(redis: str) -> None:
    _setup(redis)
    report("throttles: one address check as the web worker runs it", _cost_lines())
    report("throttles: concurrent requests against one limit", _race_lines())
