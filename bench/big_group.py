"""One group of --machines machines (target: its refresh well under a second), built in --database
from one stored submission: each synthetic machine a key of its own with one copy of that
submission, its measurement rows scaled by a machine factor. Then cells.refresh_group, the code a
worker runs, timed on it. Needs a state (`bench state --size 1000` is plenty); PostgreSQL only."""

from __future__ import annotations

import os
import statistics
import time
from pathlib import Path
from typing import TYPE_CHECKING

from bench.figures import report

if TYPE_CHECKING:
    from benchhub.results.cells import Group

CHIP = "Synthetic group"
REPEATS = 5


def _columns(model: object, replaced: dict[str, str]) -> tuple[str, str]:
    """The model's columns but its id, and the SELECT list copying them with `replaced` expressions."""
    from django.db import models

    assert isinstance(model, type) and issubclass(model, models.Model)
    names = [field.column for field in model._meta.concrete_fields if not field.primary_key or field.column in replaced]
    return ", ".join(f'"{name}"' for name in names), ", ".join(replaced.get(name, f't."{name}"') for name in names)


def build(machines: int) -> tuple[Group, int]:
    """The synthetic group (replacing an earlier one) and its measurement count."""
    from django.db import connection, transaction

    from benchhub.accounts.models import Contributor, PublicKey
    from benchhub.results import board, cells
    from benchhub.results.models import CellGroup, Headline, LeaderboardCell, Measurement, Submission

    template = Submission.objects.filter(measurements__isnull=False).exclude(chip__startswith=CHIP).first()
    if template is None:
        raise SystemExit("the database holds no submission: run `python -m bench state --size 1000` on it first")
    chip = f"{CHIP} of {machines} machines"
    group = board.Group(template.campaign_id, chip, template.gpu_cores, template.model_sha256, template.backend)
    prefix = f"synthetic-{machines}-"
    with transaction.atomic():
        Measurement.objects.filter(chip=chip).delete()
        for model in (LeaderboardCell, Headline, CellGroup):
            model.objects.filter(**group.filter()).delete()
        Submission.objects.filter(chip=chip).delete()
        PublicKey.objects.filter(keyid__startswith=prefix).delete()
        cells.ensure_group(group)
        with connection.cursor() as cursor:
            cursor.execute(
                f"""INSERT INTO {PublicKey._meta.db_table} (keyid, public_key, contributor_id, banned, created_at,
                    registered_network)
                SELECT %s || n, decode(md5(n::text), 'hex') || decode(md5(n::text), 'hex'),
                    contributors.ids[1 + n %% cardinality(contributors.ids)], false, now() - interval '30 days', ''
                FROM generate_series(1, %s) AS n,
                    (SELECT array_agg(id ORDER BY id) AS ids FROM {Contributor._meta.db_table}) AS contributors""",
                [prefix, machines],
            )
            columns, values = _columns(
                Submission,
                {
                    "id": "gen_random_uuid()",
                    "key_id": "k.id",
                    "contributor_id": "k.contributor_id",
                    "nonce": "md5(k.keyid)",
                    "payload_sha256": "encode(sha256(convert_to(k.keyid, 'UTF8')), 'hex')",
                    "measured_sha256": "encode(sha256(convert_to(k.keyid || 'm', 'UTF8')), 'hex')",
                    "chip": "%s",
                    "received_at": "now() - k.id * interval '1 millisecond'",  # arrivals apart, as they come
                    "cells_refreshed_at": "NULL",
                    "model_held": "false",
                },
            )
            cursor.execute(
                f"""INSERT INTO {Submission._meta.db_table} ({columns})
                SELECT {values} FROM {Submission._meta.db_table} t, {PublicKey._meta.db_table} k
                WHERE t.id = %s AND k.keyid LIKE %s""",
                [chip, template.pk, prefix + "%"],
            )
            # A machine's rows scaled by its own factor (within ±10%), so machines differ.
            columns, values = _columns(
                Measurement,
                {
                    "submission_id": "s.id",
                    "key_id": "s.key_id",
                    "contributor_id": "s.contributor_id",
                    "chip": "s.chip",
                    "excluded_reason": "''",  # every row counts
                    "speedup": "t.speedup * (0.9 + 0.2 * ((hashtext(s.id::text) & 1023) / 1023.0))",
                    "baseline_tg_tps": "t.baseline_tg_tps * (0.9 + 0.2 * ((hashtext(s.key_id::text) & 1023) / 1023.0))",
                },
            )
            cursor.execute(
                f"""INSERT INTO {Measurement._meta.db_table} ({columns})
                SELECT {values} FROM {Measurement._meta.db_table} t, {Submission._meta.db_table} s
                WHERE t.submission_id = %s AND s.chip = %s""",
                [template.pk, chip],
            )
    with connection.cursor() as cursor:  # the server here runs without autovacuum
        cursor.execute(f"VACUUM ANALYZE {Measurement._meta.db_table}")
        cursor.execute(f"VACUUM ANALYZE {Submission._meta.db_table}")
    return group, Measurement.objects.filter(chip=chip).count()


def _backend_cpu_seconds() -> float | None:
    """CPU seconds the PostgreSQL backend serving this connection has used (it runs on this host in the
    bench); None where /proc cannot tell."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        (pid,) = cursor.fetchone()
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run(machines: int) -> None:
    from benchhub.results import cells
    from benchhub.results.models import LeaderboardCell

    started = time.perf_counter()
    group, rows = build(machines)
    built = time.perf_counter() - started
    cells.refresh_group(group)  # the submissions marked refreshed: every timed refresh does the same work
    seconds, python_cpu, database_cpu = [], [], []
    for _ in range(REPEATS):
        backend = _backend_cpu_seconds()
        started, cpu = time.perf_counter(), time.process_time()
        cells.refresh_group(group)
        seconds.append(time.perf_counter() - started)
        python_cpu.append(time.process_time() - cpu)
        after = _backend_cpu_seconds()
        if backend is not None and after is not None:
            database_cpu.append(after - backend)
    found = LeaderboardCell.objects.filter(**group.filter()).order_by("-n_machines").first()
    largest = found.n_machines if found else 0
    cpu_line = f"CPU, median: Python {statistics.median(python_cpu):.2f} s"
    if database_cpu:
        cpu_line += f" + PostgreSQL {statistics.median(database_cpu):.2f} s (its backend, from /proc)"
    report(
        f"one group of {machines} machines: cells.refresh_group",
        [
            f"{rows} measurements, built in {built:.0f} s; its largest cell counts {largest} machines",
            f"refresh: median {statistics.median(seconds) * 1000:.0f} ms "
            f"(spread {min(seconds) * 1000:.0f}-{max(seconds) * 1000:.0f} ms, n={REPEATS})",
            cpu_line + ": on a busy machine the wall time waits for cores, the CPU does not",
            "previous: 2.56 s quiet (2.40-3.02), CPU 1.35 s Python + 1.51 s PostgreSQL "
            "(2026-12-07, a 2-core Xeon @ 2.60GHz, load 0.9)",
        ],
    )
