"""Issue 7, item 10: sustained mixed reads and writes at half the measured capacity of that mix
(its writes and their reads), with memory and latency sampled per window. BENCHHUB_LOAD_MINUTES
sets the length (default 5; the issue asks for 30: run with BENCHHUB_LOAD_MINUTES=30). Asserted:
no error at all and resident memory that does not keep growing; latencies and the refresh backlog
are printed for docs/reliability.md, not asserted (timings are never asserted)."""

from __future__ import annotations

import os
import statistics
import threading
import time
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import requests

from benchhub.results.models import Submission
from tests.reliability.faults import Stack, numbered_envelope, refreshed_count, register_signers, start_web

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]
MINUTES = float(os.environ.get("BENCHHUB_LOAD_MINUTES", "5"))
WINDOW_S = 30.0
READS = ("/api/v1/leaderboard/?campaign=mv-ext-iquants", "/api/v1/submissions/", "/")


def resident_kib(root_pid: int) -> int:
    """Resident memory of a process and all its descendants (gunicorn's master and workers)."""
    total, pending = 0, [root_pid]
    while pending:
        pid = pending.pop()
        try:
            status = Path(f"/proc/{pid}/status").read_text()
            children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
        except OSError:
            continue
        total += next(int(line.split()[1]) for line in status.splitlines() if line.startswith("VmRSS:"))
        pending.extend(int(child) for child in children)
    return total


@dataclass
class Window:
    writes: list[float] = field(default_factory=list)
    reads: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


def is_write(number: int) -> bool:
    return number % 3 == 0


def send(stack: Stack, number: int) -> requests.Response:
    """Request `number` of the mix: a signed submission, then two reads, in turn."""
    if is_write(number):
        return stack.post("/api/v1/submissions/", numbered_envelope(number))
    return requests.get(stack.base + READS[number % len(READS)], timeout=30)


def timed(stack: Stack, window: Window, lock: threading.Lock, number: int, scheduled: float) -> None:
    """Latency counts from when the request was due, so time spent waiting for a free client counts
    too (a slow server cannot hide behind a generator that slowed down with it)."""
    try:
        answer = send(stack, number)
        error = f"{answer.status_code} {answer.text[:100]}" if answer.status_code >= 400 else None
    except requests.RequestException as refused:
        error = repr(refused)
    with lock:
        (window.writes if is_write(number) else window.reads).append(time.monotonic() - scheduled)
        if error is not None:
            window.errors.append(error)


def measure_capacity(stack: Stack, seconds: float = 15) -> float:
    """Writes per second of the mix itself (each with its two reads), four clients sending back to
    back: the reads cost the 2 cores too, so half of a capacity measured on writes alone is more than
    the machine can serve once the reads are added (26 writes/s and 53 reads/s on a machine whose
    writes alone reach 53/s left every window's answers seconds late)."""
    done, counter, lock = time.monotonic() + seconds, [3 * 10**6], threading.Lock()

    def client() -> int:
        writes = 0
        while time.monotonic() < done:
            with lock:
                counter[0] += 1
                number = counter[0]
            answer = send(stack, number)
            assert answer.status_code < 400, f"{answer.status_code} {answer.text[:200]}"
            writes += is_write(number)
        return writes

    with ThreadPoolExecutor(4) as pool:
        return sum(pool.map(lambda _: client(), range(4))) / seconds


def p(values: list[float], q: int) -> float:
    return statistics.quantiles(values, n=100)[q - 1] * 1000 if len(values) > 1 else float("nan")


def test_it_holds_memory_flat_under_sustained_mixed_load(fault_stack: Stack) -> None:
    # Production's staleness bound (the stack's default is 0, for the tests that compare boards):
    # the reads are those a busy site serves, boards re-rendered at most once per 5 s.
    fault_stack.env["BENCHHUB_BOARD_MAX_STALENESS_SECONDS"] = "5"
    start_web(fault_stack)
    fault_stack.start("worker")
    fault_stack.start("beat")
    register_signers(fault_stack)
    capacity = measure_capacity(fault_stack)
    rate = capacity / 2 * 3  # requests per second: half the mix's capacity, two reads per write
    print(
        f"capacity of the mix {capacity:.1f} writes/s + {2 * capacity:.1f} reads/s;"
        f" load {capacity / 2:.1f} writes/s + {capacity:.1f} reads/s"
    )
    web_pid = fault_stack.processes["web"].pid
    windows: list[tuple[Window, int, int]] = []
    lock = threading.Lock()
    number = 0
    end = time.monotonic() + MINUTES * 60
    # Enough threads that a slow answer never holds back the next request: the offered rate stays fixed.
    with ThreadPoolExecutor(64) as pool:
        while time.monotonic() < end:
            window, window_end = Window(), time.monotonic() + WINDOW_S
            next_at = time.monotonic()
            pending = []
            while time.monotonic() < window_end:
                pending.append(pool.submit(timed, fault_stack, window, lock, number, next_at))
                number += 1
                next_at += 1 / rate
                time.sleep(max(0.0, next_at - time.monotonic()))
            # Each window's requests are answered before it is sampled: no backlog carried unseen.
            _, unanswered = wait(pending, timeout=120)
            window.errors.extend("not answered within 120 s" for _ in unanswered)
            backlog = Submission.objects.count() - refreshed_count()
            windows.append((window, resident_kib(web_pid), backlog))
            print(
                f"window {len(windows):3d}: writes p50 {p(window.writes, 50):6.1f} ms"
                f" p95 {p(window.writes, 95):6.1f} ms"
                f" | reads p50 {p(window.reads, 50):6.1f} ms p95 {p(window.reads, 95):6.1f} ms"
                f" | {len(window.writes)} writes {len(window.reads)} reads done"
                f" | web RSS {windows[-1][1] / 1024:6.1f} MiB | unrefreshed {backlog} | errors {len(window.errors)}",
                flush=True,
            )
    errors = [error for window, _, _ in windows for error in window.errors]
    assert errors == []
    # Flat: the last third of the run uses no more than 20% over the first third's peak (after warm-up).
    third = max(1, len(windows) // 3)
    early = max(rss for _, rss, _ in windows[:third])
    late = max(rss for _, rss, _ in windows[-third:])
    print(f"web RSS first third peak {early / 1024:.1f} MiB, last third peak {late / 1024:.1f} MiB")
    assert late <= early * 1.2
