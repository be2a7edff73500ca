"""Issue 6 target 1: signed submissions posted by concurrent clients to gunicorn + PostgreSQL with a
real Celery worker, beside the floor measured in the same run (verify, canonical check, parse,
schema, insert with COPY, in one plain process with psycopg)."""

from __future__ import annotations

import multiprocessing
import random
import statistics
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psycopg
from benchhub_agent import envelope, schema

from bench import payloads
from bench.client import post_bodies
from bench.cpu import KINDS, CpuSample
from bench.figures import percentile, report, summary
from bench.relations import RelationCounters, RelationTraffic, traffic_lines
from bench.stack import Stack, service_env
from bench.vacuum import autovacuum_stand_in


@dataclass
class Crowd:
    signers: list[envelope.Signer]
    variants: list[payloads.VariantSpec]
    rng: random.Random

    def bodies(self, count: int) -> list[bytes]:
        return [
            payloads.signed_body(payloads.payload(self.rng, self.variants), self.rng.choice(self.signers))
            for _ in range(count)
        ]


def crowd(size: int, seed: int) -> Crowd:
    from benchhub.results import campaigns
    from benchhub.results.models import Campaign

    definition = Campaign.objects.get(slug=payloads.CAMPAIGN).definition
    hashes = {name: campaigns.patch_file(name).sha256 or "" for name in campaigns.campaign_patch_names(definition)}
    signers = [payloads.persona(index) for index in range(size)]
    return Crowd(signers, payloads.campaign_variants(definition, hashes), random.Random(seed))


def register_over_http(base: str, signers: list[envelope.Signer]) -> None:
    import urllib.request

    for index, signer in enumerate(signers):
        request = urllib.request.Request(
            f"{base}/api/v1/contributors/",
            data=payloads.registration_body(signer, f"bench-{index}"),
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=30) as answer:
            if answer.status not in (200, 201):
                raise RuntimeError(f"registration of bench-{index} answered {answer.status}")


@dataclass(frozen=True)
class IoCounters:
    """PostgreSQL's cumulative I/O counters: WAL of the whole server (pg_stat_wal; other databases'
    writes count too), blocks of this database read from outside shared_buffers, and those found in
    them (each a page visited: an index descent costs one per level), and the sessions opened on
    this database (each a new server process)."""

    wal_bytes: int
    full_page_images: int
    blocks_read: int
    blocks_hit: int
    sessions: int

    @classmethod
    def now(cls, database_url: str) -> IoCounters:
        with psycopg.connect(database_url, autocommit=True) as connection:
            row = connection.execute(
                "SELECT w.wal_bytes, w.wal_fpi, d.blks_read, d.blks_hit, d.sessions "
                "FROM pg_stat_wal w, pg_stat_database d WHERE d.datname = current_database()"
            ).fetchone()
        assert row is not None
        return cls(*(int(value) for value in row))

    def __sub__(self, other: IoCounters) -> IoCounters:
        return IoCounters(
            self.wal_bytes - other.wal_bytes,
            self.full_page_images - other.full_page_images,
            self.blocks_read - other.blocks_read,
            self.blocks_hit - other.blocks_hit,
            self.sessions - other.sessions,
        )


SERVER_SETTINGS = ("shared_buffers", "max_wal_size", "checkpoint_timeout", "wal_compression", "autovacuum")


def server_settings(database_url: str) -> str:
    """The PostgreSQL settings that decide how much an index page touched at random costs."""
    with psycopg.connect(database_url, autocommit=True) as connection:
        shown = [f"{name} {connection.execute(f'SHOW {name}').fetchone()[0]}" for name in SERVER_SETTINGS]  # type: ignore[index]
    return "PostgreSQL " + ", ".join(shown)


@dataclass
class RoundResult:
    accepted: int
    refused: int
    wall_s: float
    latencies: list[float]
    drained_s: float
    io: IoCounters | None = None
    relations: RelationTraffic | None = None
    cpu: dict[str, float] | None = None  # seconds by kind of process (bench/cpu.py), and the wall

    @property
    def rate(self) -> float:
        return self.accepted / self.wall_s

    def per_submission(self, counter: str, scale: float = 1.0) -> float:
        assert self.io is not None
        return getattr(self.io, counter) / scale / max(self.accepted, 1)

    def cpu_ms(self, kind: str) -> float:
        """Milliseconds of CPU a submission that kind of process used ("busy": the machine's all)."""
        assert self.cpu is not None
        seconds = sum(self.cpu[k] for k in KINDS) if kind == "busy" else self.cpu[kind]
        return 1000 * seconds / max(self.accepted, 1)


def measured_io(database_url: str, measure: Any, *args: Any) -> RoundResult:
    """A round with the I/O counters' and the CPU time's growth over it."""
    relations_before = RelationCounters.now(database_url)
    before, cpu_before = IoCounters.now(database_url), CpuSample.now()
    result: RoundResult = measure(*args)
    result.cpu = CpuSample.now().since(cpu_before)
    relations_after = RelationCounters.now(database_url)
    result.io = IoCounters.now(database_url) - before
    result.relations = relations_after.since(relations_before, database_url)
    return result


def cpu_lines(http_rounds: list[RoundResult], floors: list[RoundResult]) -> list[str]:
    """Where the machine's CPU went, per accepted submission: what explains ingest against the floor."""
    labels = {
        "gunicorn": "gunicorn (web)",
        "celery": "Celery worker, beat",
        "postgres": "PostgreSQL (all)",
        "redis": "Redis",
        "clients": "the 4 clients",
        "bench": "bench process",
        "other": "other (not ours)",
        "busy": "machine, all",
    }
    lines = ["CPU ms per accepted submission, HTTP round | floor round (bench process = the floor there):"]
    for kind, label in labels.items():
        lines.append(
            f"  {label + ':':<22}{summary([r.cpu_ms(kind) for r in http_rounds])} | "
            f"{summary([r.cpu_ms(kind) for r in floors])}"
        )
    lines.append(
        f"  {'wall ms:':<22}{summary([r.cpu_ms('wall') for r in http_rounds])} | "
        f"{summary([r.cpu_ms('wall') for r in floors])} (busy / wall = cores in use; 2 here)"
    )
    return lines


def _unrefreshed(since: datetime) -> int:
    from benchhub.results.models import Submission

    return Submission.objects.filter(cells_refreshed_at__isnull=True, received_at__gte=since).count()


def http_round(port: int, bodies: list[bytes], clients: int) -> RoundResult:
    shares = [bodies[index::clients] for index in range(clients)]
    start_at = time.time() + 1.5
    since = datetime.now(UTC)
    with multiprocessing.get_context("spawn").Pool(clients) as pool:
        results = pool.map(post_bodies, [(port, share, start_at) for share in shares])
    wall = time.time() - start_at
    flat = [item for result in results for item in result]
    accepted = sum(status == 201 for _, status in flat)
    while _unrefreshed(since):
        time.sleep(0.2)
    drained = time.time() - start_at
    return RoundResult(accepted, len(flat) - accepted, wall, [seconds for seconds, _ in flat], drained)


def floor_round(connection: psycopg.Connection[Any], bodies: list[bytes]) -> RoundResult:
    """Everything the ingest must do, in one process without Django's request handling: the yardstick.
    Rows are derived and written by the product's functions (bench/copyrows.py) with psycopg and COPY.
    The connection is the caller's, so that its server process outlives the round's CPU count."""
    from bench import copyrows
    from benchhub.results.models import Campaign

    campaign = Campaign.objects.get(slug=payloads.CAMPAIGN)
    latencies = []
    lookups = copyrows.Lookups(campaign.pk, campaign.definition["sweep"])
    started_all = time.perf_counter()
    for body in bodies:
        started = time.perf_counter()
        opened = envelope.open_envelope(envelope.strict_loads(body), envelope.SUBMISSION_TYPE)
        keyid = opened.keyids[0]
        with connection.cursor() as cursor:
            key_id, contributor_id, public_key = cursor.execute(
                "SELECT id, contributor_id, public_key FROM accounts_publickey WHERE keyid = %s AND NOT banned",
                [keyid],
            ).fetchone()  # type: ignore[misc]
        if not envelope.verify_signature(opened, keyid, bytes(public_key)):
            raise RuntimeError("a bench envelope did not verify")
        payload = envelope.parse_canonical_payload(opened.payload)
        schema.validate_submission(payload)
        rows = copyrows.submission_rows(
            payload,
            body,
            copyrows.sha256_hex(opened.payload),
            key=(key_id, contributor_id),
            lookups=lookups,
            received_at=copyrows.now(),
            refreshed=True,
        )
        with connection.transaction(), connection.cursor() as cursor:
            copyrows.write(cursor, [rows])
        latencies.append(time.perf_counter() - started)
    wall = time.perf_counter() - started_all
    return RoundResult(len(bodies), 0, wall, latencies, wall)


def run(database_url: str, redis_url: str, *, rounds: int, per_round: int, clients: int, web_workers: int) -> None:
    bench_crowd = crowd(16, seed=6)
    logs = Path("bench/results/logs")
    stack = Stack(service_env(database_url, redis_url), logs, web_workers, worker_concurrency=2)
    http_rounds: list[RoundResult] = []
    floors: list[RoundResult] = []
    stack.start()
    try:
        register_over_http(stack.base, bench_crowd.signers)
        with (
            autovacuum_stand_in(database_url) as stand_in,
            psycopg.connect(database_url, autocommit=True) as floor_connection,
        ):
            for _ in range(rounds):
                http_rounds.append(
                    measured_io(database_url, http_round, stack.port, bench_crowd.bodies(per_round), clients)
                )
                floors.append(measured_io(database_url, floor_round, floor_connection, bench_crowd.bodies(per_round)))
    finally:
        stack.stop()
    body_kib = statistics.median(len(body) for body in bench_crowd.bodies(20)) / 1024
    lines = [
        f"{rounds} rounds of {per_round} signed submissions ({len(bench_crowd.variants)} variants x "
        f"{len(payloads.BATCH_SIZES)} batch sizes x {payloads.REPS} reps, correctness and generation checks; "
        f"~{body_kib:.1f} KiB envelopes) from {clients} client processes to gunicorn --workers {web_workers} "
        "+ PostgreSQL, a Celery worker (--concurrency 2, as in docker-compose.yml) refreshing cells meanwhile; "
        "the clients share the same 2 cores",
        server_settings(database_url),
        *([stand_in.line()] if stand_in else []),
        f"accepted/s (HTTP):      {summary([r.rate for r in http_rounds])}",
        f"p50 latency ms (HTTP):  {summary([1000 * percentile(r.latencies, 0.5) for r in http_rounds])}",
        f"p99 latency ms (HTTP):  {summary([1000 * percentile(r.latencies, 0.99) for r in http_rounds])}",
        f"refused:                {sum(r.refused for r in http_rounds)} of {rounds * per_round}",
        f"cells current after s:  {summary([r.drained_s for r in http_rounds])} (from the first POST)",
        f"floor/s (one process):  {summary([r.rate for r in floors])}",
        f"floor p99 ms:           {summary([1000 * percentile(r.latencies, 0.99) for r in floors])}",
        "ingest / floor:         "
        + summary([h.rate / f.rate for h, f in zip(http_rounds, floors, strict=True)])
        + " (per round, same run)",
        "per accepted submission, HTTP round (the worker's refreshes included) | floor round:",
        *(
            f"  {label:<22}{summary([r.per_submission(counter, scale) for r in http_rounds])} | "
            f"{summary([r.per_submission(counter, scale) for r in floors])}"
            for label, counter, scale in (
                ("WAL kB:", "wal_bytes", 1000.0),
                ("full-page images:", "full_page_images", 1.0),
                ("blocks read:", "blocks_read", 1.0),
                ("blocks hit:", "blocks_hit", 1.0),
                ("sessions opened:", "sessions", 1.0),
            )
        ),
        "  (WAL is the server's: other databases' writes count too; blocks read: this database's, from "
        "outside shared_buffers, so from the OS cache or the disk; blocks hit: found in shared_buffers)",
        *cpu_lines(http_rounds, floors),
        *relation_lines("HTTP round", http_rounds),
        *relation_lines("floor round", floors),
    ]
    report("ingest (issue 6 target 1)", lines)


def relation_lines(title: str, rounds: list[RoundResult]) -> list[str]:
    measured = [(r.relations, r.accepted) for r in rounds if r.relations is not None]
    return traffic_lines(title, measured) if measured else []


def register_in_process(client: Any, bench_crowd: Crowd, prefix: str) -> None:
    """Register the crowd's keys through the API in this process (a key registered before answers 409)."""
    for index, signer in enumerate(bench_crowd.signers):
        client.post(
            "/api/v1/contributors/",
            payloads.registration_body(signer, f"{prefix}-{index}"),
            content_type="application/json",
        )


def profile(count: int) -> None:
    """Where an API ingest spends its time, in process (no HTTP, no gunicorn): pyinstrument's tree."""
    from django.conf import settings
    from django.test import Client
    from pyinstrument import Profiler
    from redis import Redis

    from benchhub.results import cells
    from benchhub.results.models import Submission

    bench_crowd = crowd(16, seed=7)
    client = Client()
    register_in_process(client, bench_crowd, "bench")
    bodies = bench_crowd.bodies(count)
    profiler = Profiler(interval=0.0005)
    profiler.start()
    started, cpu_started = time.perf_counter(), time.process_time()
    for body in bodies:
        answer = client.post("/api/v1/submissions/", body, content_type="application/json")
        if answer.status_code != 201:
            raise RuntimeError(f"profiled ingest answered {answer.status_code}: {answer.content[:200]!r}")
    wall, cpu = time.perf_counter() - started, time.process_time() - cpu_started
    profiler.stop()
    for submission_id in Submission.objects.filter(cells_refreshed_at__isnull=True).values_list("id", flat=True):
        cells.refresh_submission_cells(str(submission_id))  # no worker consumes the profile's queue
    Redis.from_url(settings.REDIS_URL).delete(settings.CELERY_TASK_DEFAULT_QUEUE)
    report(
        "ingest profile (pyinstrument, in process, cell refresh queued to the broker)",
        [
            f"{count} submissions, {1000 * wall / count:.1f} ms each in process, of which "
            f"{1000 * cpu / count:.1f} ms CPU (the profiler's own overhead included)"
        ],
    )
    print(profiler.output_text(unicode=False, color=False, show_all=False, timeline=False), flush=True)


def campaign_ready() -> Any:
    from benchhub.results.campaigns import sync_campaigns
    from benchhub.results.models import Campaign

    sync_campaigns(Campaign)
    return Campaign.objects.get(slug=payloads.CAMPAIGN)
