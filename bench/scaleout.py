"""Scale-out: ingest throughput and upload-to-board latency with N gunicorn workers and N Celery
worker processes (N = 1, 2, 4, 8 by default) against one PostgreSQL.

`python -m bench scaleout` grows a base state (bench/state.py) once, then runs each step in a
process of its own on a fresh copy of it (CREATE DATABASE ... TEMPLATE), so every step starts from
the same rows. A step starts the production commands (bench/stack.py) with N web and N worker
processes; --clients processes post signed submissions back to back for --seconds (a closed loop:
the offered load is whatever the service takes), while a thread reads the leaderboard API in a
loop and another samples the CPU of each part from /proc and PostgreSQL's wait events from
pg_stat_activity. After the load it waits up to --drain seconds for every cell, then derives:

- accepted/s: 201s answered within the load window, over its length;
- 201 -> refreshed: the submission's cells_refreshed_at (set by the refresh, just before it commits);
- 201 -> shown: the first API read whose baseline cell at batch size 1 counts as many submissions
  as the database held for that cell up to the submission's own (latency.py's rule, found after
  the run from received_at); one never seen within the drain counts as infinitely late.

Writes scaleout.json into the --out folder after each step and, where matplotlib is installed, scaleout.png.
"""

from __future__ import annotations

import argparse
import bisect
import json
import multiprocessing
import os
import random
import subprocess
import sys
import threading
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench import payloads
from bench.figures import conditions, percentile

HOST = "postgres://postgres@127.0.0.1:5432"
BASE_DATABASE = "bh_perf_scaleout_base"
STEP_DATABASE = "bh_perf_scaleout_step"
BATCH_SIZE = 1  # the watched cell, as in latency.py
CROWD = 16  # bench keys posting; registered over HTTP in each step
SAMPLE_EVERY_S = 0.5
STEP_OVERHEAD_S = 45  # migrate check, start, registration, stop: what a step costs beside load and drain
PARTS = ("web", "worker", "beat", "postgres", "redis", "clients")


def arguments() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m bench scaleout", description=__doc__)
    parser.add_argument("--host", default=os.environ.get("BENCH_HOST", HOST), help="PostgreSQL server URL")
    parser.add_argument("--redis", default=os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/9"))
    parser.add_argument("--steps", default="1,2,4,8", help="N: gunicorn workers = Celery worker processes")
    parser.add_argument("--size", type=int, default=5000, help="submissions in the base state")
    parser.add_argument("--processes", type=int, default=4, help="processes growing the base state")
    parser.add_argument("--clients", type=int, default=16, help="client processes posting back to back")
    parser.add_argument("--seconds", type=float, default=40.0, help="load per step")
    parser.add_argument("--drain", type=float, default=60.0, help="at most this long for the cells after the load")
    parser.add_argument("--budget", type=float, default=3600.0, help="overall s; a step that would pass it is skipped")
    parser.add_argument("--out", type=Path, default=Path("bench/results/scaleout"))
    parser.add_argument("--chart", type=Path, help="only draw this scaleout.json's PNG beside it")
    parser.add_argument("--only-step", type=int, help=argparse.SUPPRESS)  # internal: one step, this process
    return parser


def main(argv: list[str]) -> int:
    options = arguments().parse_args(argv)
    if options.chart is not None:
        document = json.loads(options.chart.read_text())
        print_table(document)
        return 0 if chart(document, options.chart.with_suffix(".png")) else 1
    if options.only_step is not None:
        result = run_step(options, options.only_step)
        options.out.mkdir(parents=True, exist_ok=True)
        (options.out / f"step-{options.only_step}.json").write_text(json.dumps(result, indent=1))
        return 0
    return run(options)


# ---------------------------------------------------------------------------- the driver


def run(options: argparse.Namespace) -> int:
    started = time.monotonic()
    options.out.mkdir(parents=True, exist_ok=True)
    steps = [int(value) for value in options.steps.split(",")]
    common = ["--redis", options.redis]
    base = f"{options.host}/{BASE_DATABASE}"
    drop_database(options.host, BASE_DATABASE)  # a state of this run's --size, by this code
    state = [sys.executable, "-m", "bench", "state", "--database", base, "--size", str(options.size)]
    subprocess.run([*state, "--processes", str(options.processes), *common], check=True)
    document: dict[str, Any] = {
        "when": datetime.now(UTC).isoformat(timespec="seconds"),
        "conditions": conditions(),
        "cores": os.cpu_count(),
        "base_state_submissions": options.size,
        "clients": options.clients,
        "seconds": options.seconds,
        "drain_s": options.drain,
        "steps": [],
        "skipped": [],
    }
    for n in steps:
        left = options.budget - (time.monotonic() - started)
        # The drain is a bound, seldom reached: a step is run while its load fits, its drain cut to fit.
        drain = min(options.drain, left - options.seconds - STEP_OVERHEAD_S)
        if drain < 10:
            document["skipped"].append(n)
            print(f"scaleout: step {n} skipped, {left:.0f} s of the budget left", flush=True)
            continue
        copy_database(options.host, BASE_DATABASE, STEP_DATABASE)
        step = [sys.executable, "-m", "bench", "scaleout", *argv_of(options, drain), "--only-step", str(n)]
        try:
            subprocess.run(step, check=True, timeout=left - 5)
            document["steps"].append(json.loads((options.out / f"step-{n}.json").read_text()))
        except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as failure:
            document["skipped"].append(n)
            print(f"scaleout: step {n} failed: {failure}", flush=True)
        write(document, options.out)
    write(document, options.out)
    print_table(document)
    return 0 if document["steps"] else 1


def argv_of(options: argparse.Namespace, drain: float) -> list[str]:
    """The options a step process needs, as given to the driver."""
    return [
        *("--host", options.host, "--redis", options.redis, "--clients", str(options.clients)),
        *("--seconds", str(options.seconds), "--drain", str(drain), "--out", str(options.out)),
    ]


def drop_database(host: str, name: str) -> None:
    import psycopg

    with psycopg.connect(f"{host}/postgres", autocommit=True) as connection:
        connection.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def copy_database(host: str, template: str, name: str) -> None:
    """A fresh copy of the base state (a file copy inside PostgreSQL, no rows re-written)."""
    import psycopg

    drop_database(host, name)
    with psycopg.connect(f"{host}/postgres", autocommit=True) as connection:
        connection.execute(f'CREATE DATABASE "{name}" TEMPLATE "{template}"')


def write(document: dict[str, Any], out: Path) -> None:
    (out / "scaleout.json").write_text(json.dumps(document, indent=1))
    chart(document, out / "scaleout.png")


def print_table(document: dict[str, Any]) -> None:
    print(f"\n== scale-out: {document['conditions']}", flush=True)
    for line in table_lines(document):
        print(f"   {line}", flush=True)


def seconds_text(value: float | None) -> str:
    return "not within the drain" if value is None else f"{value:.2f}"


def cores_text(value: float | None) -> str:
    return "?" if value is None else f"{value:.1f}"


def table_lines(document: dict[str, Any]) -> list[str]:
    """The Markdown table of docs/performance.md section 8."""
    lines = [
        "| N | accepted/s | 201 → refreshed p50 / p95 s | 201 → on the API p50 / p95 s | CPU cores: web / worker / "
        "PostgreSQL / clients / machine | backends waiting on a lock | queue max |",
        "|---|---|---|---|---|---|---|",
    ]
    for step in document["steps"]:
        cpu = step["cpu_cores"]
        lines.append(
            f"| {step['n']} | {step['accepted_per_s']:.1f} | {seconds_text(step['refreshed_s']['p50'])} / "
            f"{seconds_text(step['refreshed_s']['p95'])} | {seconds_text(step['shown_s']['p50'])} / "
            f"{seconds_text(step['shown_s']['p95'])} | "
            f"{' / '.join(cores_text(cpu[part]) for part in ('web', 'worker', 'postgres', 'clients', 'machine'))} | "
            f"{step['pg_lock_waiting']:.2f} | {step['queue_max']} |"
        )
    return lines


def chart(document: dict[str, Any], path: Path) -> bool:
    """Three panels over N: accepted/s (with linear scaling from N=1), the p95s, CPU per part."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("scaleout: matplotlib is not installed, no PNG (scaleout.json holds the figures)", flush=True)
        return False
    steps = document["steps"]
    if not steps:
        return False
    ns = [step["n"] for step in steps]
    figure, (rate, latency, cpu) = plt.subplots(1, 3, figsize=(15, 4.6))
    rates = [step["accepted_per_s"] for step in steps]
    rate.plot(ns, rates, "o-", label="accepted/s")
    rate.plot(ns, [rates[0] * n / ns[0] for n in ns], "--", color="grey", label="linear from the first step")
    rate.set(title="ingest throughput", xlabel="N gunicorn workers = N Celery processes", ylabel="submissions/s")
    for key, label in (("refreshed_s", "201 -> cells refreshed"), ("shown_s", "201 -> shown on the API")):
        p95 = [step[key]["p95"] for step in steps]
        latency.plot(
            [n for n, value in zip(ns, p95, strict=True) if value is not None],
            [value for value in p95 if value is not None],
            "o-",
            label=f"{label}, p95",
        )
    latency.set(title="upload to board under that load", xlabel="N", ylabel="seconds")
    bottom = [0.0] * len(steps)
    for part in PARTS:
        heights = [step["cpu_cores"][part] or 0.0 for step in steps]
        cpu.bar([str(n) for n in ns], heights, bottom=bottom, label=part)
        bottom = [low + height for low, height in zip(bottom, heights, strict=True)]
    machine = [step["cpu_cores"]["machine"] or 0.0 for step in steps]
    cpu.plot([str(n) for n in ns], machine, "kx", markersize=9, label="whole machine")
    cpu.axhline(document["cores"] or 0, color="grey", linestyle=":", label="cores")
    cpu.set(title="CPU by part during the load", xlabel="N", ylabel="cores busy")
    for axes in (rate, latency):
        axes.set_xscale("log", base=2)
        axes.set_xticks(ns, [str(n) for n in ns])
        axes.set_ylim(bottom=0)
        axes.grid(alpha=0.3)
    for axes in (rate, latency, cpu):
        axes.legend(fontsize=8)
    figure.suptitle(
        f"benchhub scale-out, {document['when']}: {document['clients']} clients, {document['seconds']:.0f} s a step, "
        f"{document['base_state_submissions']} submissions stored, one PostgreSQL, {document['cores']} cores",
        fontsize=10,
    )
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return True


# ---------------------------------------------------------------------------- one step


@dataclass
class Answer:
    """One POST as a client saw it."""

    done_at: float  # wall clock (time.time()) when the answer was read
    status: int
    submission_id: str


def post_until(job: tuple[int, list[payloads.VariantSpec], int, float, float]) -> list[Answer]:
    """A client process: signs and posts submissions back to back from start_at until stop_at."""
    import http.client

    from benchhub_protocol.payloads import signed_submission

    port, variants, seed, start_at, stop_at = job
    rng = random.Random(seed)
    signers = [payloads.persona(index) for index in range(CROWD)]
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    answers = []
    time.sleep(max(0.0, start_at - time.time()))
    while time.time() < stop_at:
        body = signed_submission(payloads.payload(rng, variants), rng.choice(signers))
        connection.request("POST", "/api/v1/submissions/", body=body, headers={"Content-Type": "application/json"})
        response = connection.getresponse()
        text = response.read()
        submission_id = json.loads(text).get("id", "") if response.status == 201 else ""
        answers.append(Answer(time.time(), response.status, str(submission_id)))
    connection.close()
    return answers


@dataclass
class Poll:
    at: float
    counts: dict[tuple[str, int, str], int]


@dataclass
class Sample:
    at: float
    cpu_s: dict[str, float]  # cumulative CPU seconds per part (and "machine")
    waits: Counter[str] = field(default_factory=Counter)  # active backends by wait event
    lock_waiting: int = 0  # backends waiting on a heavyweight lock
    queue: int = 0  # refresh messages waiting in Redis


def run_step(options: argparse.Namespace, n: int) -> dict[str, Any]:
    from bench.__main__ import setup

    database = f"{options.host}/{STEP_DATABASE}"
    setup(database, options.redis)
    from bench.ingest import register_over_http
    from bench.latency import shown_counts
    from bench.stack import Stack, service_env
    from bench.state import variants
    from benchhub.results.models import Campaign, Submission

    baseline = Campaign.objects.get(slug=payloads.CAMPAIGN).baseline
    specs = variants()
    stored = Submission.objects.count()
    # The crowd's keys are registered during the step; production's probation would hold their rows
    # out of the counts for a day, so the bench lifts it, as it lifts the throttles.
    env = {**service_env(database, options.redis), "BENCHHUB_KEY_PROBATION_S": "0"}
    # Boards are cached per version of their cells, and every copy of the base counts its versions
    # alike: an earlier copy's boards would be served for this one's. The bench's Redis db starts empty.
    import redis

    redis.Redis.from_url(options.redis).flushdb()
    stack = Stack(env, web_workers=n, worker_concurrency=n)
    polls: list[Poll] = []
    samples: list[Sample] = []
    watching = threading.Event()
    watching.set()

    def watch() -> None:
        import http.client

        connection = http.client.HTTPConnection("127.0.0.1", stack.port, timeout=60)
        while watching.is_set():
            counts = shown_counts(connection, baseline)
            polls.append(Poll(time.time(), counts))

    def sample() -> None:
        probe = Probe(database, options.redis, env["CELERY_QUEUE"], stack)
        try:
            while watching.is_set():
                samples.append(probe.sample())
                time.sleep(SAMPLE_EVERY_S)
        finally:
            probe.close()

    stack.start()
    try:
        register_over_http(stack.base, [payloads.persona(index) for index in range(CROWD)])
        threads = [threading.Thread(target=watch), threading.Thread(target=sample)]
        for thread in threads:
            thread.start()
        start_at = time.time() + 2.0
        stop_at = start_at + options.seconds
        since = datetime.fromtimestamp(start_at - 1.0, UTC)
        seed = int(start_at)
        jobs = [(stack.port, specs, seed + index, start_at, stop_at) for index in range(options.clients)]
        with multiprocessing.get_context("spawn").Pool(options.clients) as pool:
            answers = [answer for share in pool.map(post_until, jobs) for answer in share]
        load_end = time.time()
        accepted_ids = [answer.submission_id for answer in answers if answer.status == 201]
        drain_deadline = time.monotonic() + options.drain
        while time.monotonic() < drain_deadline and unrefreshed_since(since):
            time.sleep(0.5)
        # The API serves boards up to BENCHHUB_BOARD_MAX_STALENESS_SECONDS behind their cells.
        time.sleep(min(max(0.0, drain_deadline - time.monotonic()), 7.0))
        watching.clear()
        for thread in threads:
            thread.join(timeout=60)
    finally:
        watching.clear()
        stack.stop()
    created = {answer.submission_id: answer.done_at for answer in answers if answer.status == 201}
    refreshed, shown = latencies(created, baseline, polls)
    in_window = sum(1 for answer in answers if answer.status == 201 and answer.done_at <= stop_at)
    load_samples = [s for s in samples if start_at <= s.at <= load_end] or samples
    result = {
        "n": n,
        "web_workers": n,
        "worker_concurrency": n,
        "clients": options.clients,
        "seconds": options.seconds,
        "drain_bound_s": options.drain,
        "stored_before": stored,
        "posted": len(answers),
        "accepted": len(accepted_ids),
        "refused": Counter(str(answer.status) for answer in answers if answer.status != 201),
        "accepted_per_s": in_window / options.seconds,
        "refreshed_s": spread(refreshed),
        "shown_s": spread(shown),
        "api_polls": len(polls),
        "cpu_cores": cpu_cores(load_samples),
        "pg_waits": waits(load_samples),
        "pg_lock_waiting": sum(s.lock_waiting for s in load_samples) / max(1, len(load_samples)),
        "queue_max": max((s.queue for s in samples), default=0),
        "conditions": conditions(),
    }
    print(f"scaleout step {n}: {json.dumps(result)}", flush=True)
    return result


def unrefreshed_since(since: datetime) -> int:
    from benchhub.results.models import Submission

    return Submission.objects.filter(cells_refreshed_at__isnull=True, received_at__gte=since).count()


def latencies(created: dict[str, float], baseline: str, polls: list[Poll]) -> tuple[list[float], list[float]]:
    """Seconds from each 201 to its cells refreshed and to its cell shown; inf where never seen."""
    from benchhub.results.models import Measurement, Submission

    rows = Submission.objects.filter(pk__in=list(created)).values_list("pk", "cells_refreshed_at")
    refreshed_at = {str(pk): at.timestamp() for pk, at in rows.iterator() if at is not None}
    refreshed = [refreshed_at.get(pk, float("inf")) - done_at for pk, done_at in created.items()]
    counted = (
        Measurement.objects.filter(
            campaign__slug=payloads.CAMPAIGN,
            variant_name=baseline,
            batch_size=BATCH_SIZE,
            excluded_reason="",
            speedup__isnull=False,
        )
        .order_by("submission__received_at", "submission_id")
        .values_list("chip", "gpu_cores", "model_sha256", "submission_id")
    )
    needed: dict[str, tuple[tuple[str, int, str], int]] = {}
    running: Counter[tuple[str, int, str]] = Counter()
    for chip, gpu_cores, model_sha256, submission_id in counted.iterator():
        cell = (chip, int(gpu_cores or 0), model_sha256)
        running[cell] += 1
        if str(submission_id) in created:
            needed[str(submission_id)] = (cell, running[cell])
    times = [poll.at for poll in polls]
    shown = [
        first_shown(polls, times, done_at, *needed[pk]) - done_at for pk, done_at in created.items() if pk in needed
    ]
    return refreshed, shown


def first_shown(polls: list[Poll], times: list[float], after: float, cell: tuple[str, int, str], count: int) -> float:
    """The time of the first read after `after` whose cell counts at least `count` (inf when none did)."""
    for poll in polls[bisect.bisect_left(times, after) :]:
        if poll.counts.get(cell, 0) >= count:
            return poll.at
    return float("inf")


def spread(values: list[float]) -> dict[str, float | int | None]:
    """p50, p95 and max in seconds; None where that rank was not seen within the drain."""

    def rank(share: float) -> float | None:
        if not values:
            return None
        value = percentile(values, share)
        return None if value == float("inf") else round(value, 3)

    finite = [value for value in values if value != float("inf")]
    return {
        "p50": rank(0.5),
        "p95": rank(0.95),
        "max": round(max(finite), 3) if finite else None,
        "n": len(values),
        "unseen": len(values) - len(finite),
    }


# ---------------------------------------------------------------------------- sampling


TICKS = os.sysconf("SC_CLK_TCK")


def process_table() -> dict[int, tuple[int, float]]:
    """pid -> (parent pid, CPU seconds of the process and of its children it has waited for)."""
    table = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        # After the name: state, ppid, ... utime (12th), stime, cutime, cstime.
        table[int(entry)] = (int(fields[1]), sum(int(value) for value in fields[11:15]) / TICKS)
    return table


def tree_cpu(table: dict[int, tuple[int, float]], roots: set[int], exclude: frozenset[int] = frozenset()) -> float:
    """CPU seconds of the roots and every live descendant (not under `exclude`): a child that
    exits moves its time into its parent's waited-for children, so the sum runs on."""
    children: dict[int, list[int]] = defaultdict(list)
    for pid, (parent, _) in table.items():
        children[parent].append(pid)
    total, stack = 0.0, [pid for pid in roots if pid in table]
    while stack:
        pid = stack.pop()
        total += table[pid][1]
        stack.extend(child for child in children[pid] if child not in exclude)
    return total


def machine_busy_s() -> float:
    with open("/proc/stat") as stat:
        user, nice, system, _idle, _iowait, irq, softirq, steal = (int(v) for v in stat.readline().split()[1:9])
    return (user + nice + system + irq + softirq + steal) / TICKS


class Probe:
    """Samples the parts' CPU from /proc, PostgreSQL's wait events and the Celery queue's length."""

    def __init__(self, database: str, redis_url: str, queue: str, stack: Any) -> None:
        import psycopg
        import redis

        self.connection = psycopg.connect(database, autocommit=True)
        self.redis = redis.Redis.from_url(redis_url)
        self.queue = queue
        self.stack = stack
        postmaster = self.connection.execute("SELECT pg_backend_pid()").fetchone()
        table = process_table()
        self.postmaster = {table[postmaster[0]][0]} if postmaster and postmaster[0] in table else set()
        self.redis_pid = {int(self.redis.info("server").get("process_id", 0))}

    def sample(self) -> Sample:
        table = process_table()
        services = {name: {process.pid} for name, process in self.stack.processes.items()}
        own = tree_cpu(table, {os.getpid()}, exclude=frozenset().union(*services.values()))
        cpu = {name: tree_cpu(table, pids) for name, pids in services.items()}
        # A server out of this machine's sight (another host, a container) has no figure.
        if self.postmaster:
            cpu["postgres"] = tree_cpu(table, self.postmaster)
        if self.redis_pid & set(table):
            cpu["redis"] = tree_cpu(table, self.redis_pid)
        cpu.update(clients=own, machine=machine_busy_s())
        rows = self.connection.execute(
            "SELECT coalesce(wait_event_type || ':' || wait_event, 'CPU'), left(query, 60) FROM pg_stat_activity"
            " WHERE datname = current_database() AND state = 'active' AND pid <> pg_backend_pid()"
        ).fetchall()
        waits = Counter(event for event, _ in rows)
        locked = [query for event, query in rows if event.startswith("Lock:")]
        for query in locked:
            waits[f"lock wait in: {query}"] += 1
        return Sample(time.time(), cpu, waits, len(locked), int(self.redis.llen(self.queue)))

    def close(self) -> None:
        self.connection.close()
        self.redis.close()


def cpu_cores(samples: list[Sample]) -> dict[str, float | None]:
    """Mean cores busy per part between the first and the last sample (None: not seen in both)."""
    if len(samples) < 2:
        return dict.fromkeys((*PARTS, "machine"))
    first, last = samples[0], samples[-1]
    wall = last.at - first.at
    return {
        part: round((last.cpu_s[part] - first.cpu_s[part]) / wall, 2)
        if part in first.cpu_s and part in last.cpu_s
        else None
        for part in (*PARTS, "machine")
    }


def waits(samples: list[Sample]) -> dict[str, float]:
    """Mean number of active backends in each wait event (CPU: none) over the samples."""
    total: Counter[str] = Counter()
    for sample in samples:
        total.update(sample.waits)
    return {event: round(count / max(1, len(samples)), 2) for event, count in total.most_common(12)}
