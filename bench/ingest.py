"""Ingest rate: signed submissions posted by concurrent clients to the production commands
(gunicorn, a Celery worker and beat, bench/stack.py) on PostgreSQL, until every cell is current."""

from __future__ import annotations

import multiprocessing
import random
import statistics
import time
import urllib.request
from dataclasses import dataclass
from datetime import UTC, datetime

from benchhub_protocol import envelope
from benchhub_protocol.payloads import signed_registration, signed_submission

from bench import payloads
from bench.client import post_bodies
from bench.figures import percentile, report, summary
from bench.scaleout import PARTS, Probe, process_table
from bench.stack import Stack, service_env


@dataclass
class Crowd:
    signers: list[envelope.Signer]
    variants: list[payloads.VariantSpec]
    rng: random.Random

    def bodies(self, count: int) -> list[bytes]:
        return [
            signed_submission(payloads.payload(self.rng, self.variants), self.rng.choice(self.signers))
            for _ in range(count)
        ]


def crowd(size: int, seed: int) -> Crowd:
    from bench.state import variants

    return Crowd([payloads.persona(index) for index in range(size)], variants(), random.Random(seed))


def register_over_http(base: str, signers: list[envelope.Signer]) -> None:
    """A key registered before answers 200, so a rerun on the same database registers nothing new."""
    for index, signer in enumerate(signers):
        request = urllib.request.Request(
            f"{base}/api/v1/contributors/",
            data=signed_registration(signer, f"bench-{index}"),
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=30) as answer:
            if answer.status not in (200, 201):
                raise RuntimeError(f"registration of bench-{index} answered {answer.status}")


@dataclass
class RoundResult:
    accepted: int
    refused: int
    wall_s: float
    latencies: list[float]
    drained_s: float
    cpu_ms: dict[str, float]  # CPU ms an accepted submission, by part of the stack, from the first POST to drained

    @property
    def rate(self) -> float:
        return self.accepted / self.wall_s


def unrefreshed(since: datetime) -> int:
    from benchhub.results.models import Submission

    return Submission.objects.filter(cells_refreshed_at__isnull=True, received_at__gte=since).count()


def http_round(port: int, bodies: list[bytes], clients: int, probe: Probe) -> RoundResult:
    shares = [bodies[index::clients] for index in range(clients)]
    start_at = time.time() + 1.5
    since = datetime.now(UTC)
    with multiprocessing.get_context("spawn").Pool(clients) as pool:
        before = probe.sample()  # the clients' processes exist (spawned, idle until start_at)
        before.cpu_s["postgres"] = database_backends_cpu_s(probe)
        results = pool.map(post_bodies, [(port, share, start_at) for share in shares])
        wall = time.time() - start_at
        flat = [item for result in results for item in result]
        accepted = sum(status == 201 for _, status in flat)
        while unrefreshed(since):
            time.sleep(0.2)
        drained = time.time() - start_at
        after = probe.sample()
        after.cpu_s["postgres"] = database_backends_cpu_s(probe)
    cpu_ms = {
        part: 1000 * (after.cpu_s[part] - before.cpu_s[part]) / max(accepted, 1)
        for part in PARTS
        if part in before.cpu_s and part in after.cpu_s
    }
    return RoundResult(accepted, len(flat) - accepted, wall, [seconds for seconds, _ in flat], drained, cpu_ms)


def database_backends_cpu_s(probe: Probe) -> float:
    """CPU seconds of the live backends connected to the bench's database: on a machine shared with
    other work, the postmaster's whole tree would count other databases' queries too. Django keeps
    its connections (DATABASE_CONN_MAX_AGE), so the web's and the worker's backends live through a round."""
    pids = [
        pid
        for (pid,) in probe.connection.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database()"
        ).fetchall()
    ]
    table = process_table()
    return sum(table[pid][1] for pid in pids if pid in table)


def floor_rate(crowd_: Crowd, count: int = 50, store: bool = True) -> float:
    """Submissions a second that one process sustains doing only the work a submission needs (verify,
    parse, validate and, with `store`, insert its rows; bench/ingest_profile.floor_ms), the median of `count`."""
    from bench.ingest_profile import floor_ms

    times = sorted(floor_ms(body, store) for body in crowd_.bodies(count))
    return 1000 / times[len(times) // 2]


def run(database_url: str, redis_url: str, *, rounds: int, per_round: int, clients: int, web_workers: int) -> None:
    from benchhub.results.models import Submission

    bench_crowd = crowd(16, seed=int(time.time()))  # fresh payloads on every run
    environment = service_env(database_url, redis_url)
    stack = Stack(environment, web_workers, worker_concurrency=2)
    stored = Submission.objects.count()
    http_rounds: list[RoundResult] = []
    stack.start()
    probe = Probe(database_url, redis_url, environment["CELERY_QUEUE"], stack)
    try:
        register_over_http(stack.base, bench_crowd.signers)
        for _ in range(rounds):
            http_rounds.append(http_round(stack.port, bench_crowd.bodies(per_round), clients, probe))
    finally:
        probe.close()
        stack.stop()
    floor, bare_floor = floor_rate(bench_crowd), floor_rate(bench_crowd, store=False)
    rates = [r.rate for r in http_rounds]
    cpu = {part: statistics.median(r.cpu_ms[part] for r in http_rounds) for part in http_rounds[0].cpu_ms}
    body_kib = statistics.median(len(body) for body in bench_crowd.bodies(20)) / 1024
    report(
        "ingest rate (target 1)",
        [
            f"{rounds} rounds of {per_round} signed submissions (~{body_kib:.1f} KiB envelopes) from {clients} client "
            f"processes to gunicorn --workers {web_workers} + PostgreSQL ({stored} stored before), a Celery worker "
            "(--concurrency 2) and beat refreshing cells meanwhile; clients on the same cores",
            f"accepted/s:             {summary([r.rate for r in http_rounds])}",
            "previous:               12.3/s (cells v2, 2026-12-03); target: 21.0/s, the figure before cells v2",
            f"p50 latency ms:         {summary([1000 * percentile(r.latencies, 0.5) for r in http_rounds])}",
            f"p99 latency ms:         {summary([1000 * percentile(r.latencies, 0.99) for r in http_rounds])}",
            f"refused:                {sum(r.refused for r in http_rounds)} of {rounds * per_round}",
            f"cells current after s:  {summary([r.drained_s for r in http_rounds])} (from the first POST)",
            "CPU ms a submission:    "
            + ", ".join(f"{part} {value:.1f}" for part, value in cpu.items())
            + " (median of rounds, first POST to drained; postgres: this database's backends)",
            f"in-process floor:       {floor:.1f}/s "
            "(verify, parse, validate, store the rows; median of 50, this process)",
            f"accepted/s over floor:  {statistics.median(rates) / floor:.2f} (issue 46's bar: 0.25)",
            f"without storing:        {bare_floor:.1f}/s (verify, parse, validate), accepted/s over it "
            f"{statistics.median(rates) / bare_floor:.2f}",
        ],
    )
