"""A large state cheaply: a copy of a bench state (CREATE DATABASE ... TEMPLATE), then `--copies`
minus one more copies of every submission and the rows it wrote, in SQL, each copy signed by new
keys of new contributors (so the machines grow with the submissions, as with real users), with new
primary keys and its times shifted back by one span of the state per copy. Then every group's cells
are recomputed as a worker would.

The copies' envelopes are the originals' bytes: their signatures name the original keys, so a
clone serves every read and the snapshot at its size but does not verify in recompute_cells.py."""

from __future__ import annotations

import shutil
import subprocess
import time
from datetime import datetime, timedelta
from typing import Any

import psycopg

from bench.figures import report

# Every table a submission writes (bench/state.py, results/ingest.py and storage.py), parents first.
# Machines, model files, campaigns and cell groups are shared by the copies; cells are recomputed.
COPIED = (
    "accounts_contributor",
    "accounts_publickey",
    "results_submission",
    "results_rawenvelope",
    "results_submissionvariant",
    "results_sweeprun",
    "results_sweeprow",
    "results_correctnesscheck",
    "results_generationcheck",
    "results_measurement",
)
UUID_KEYED = ("results_submission", "results_rawenvelope")
KEEP_FREE_BYTES = 20 * 2**30  # stop when a copy would leave less than this on the disk


def database_url(url: str, name: str) -> str:
    return f"{url.rsplit('/', 1)[0]}/{name}"


def create_from_template(source: str, target: str) -> str:
    """The target as a copy of the source: a template copy when no one else is connected to the
    source within a minute, otherwise pg_dump | pg_restore. Returns how it was made."""
    source_name, target_name = source.rsplit("/", 1)[1], target.rsplit("/", 1)[1]
    with psycopg.connect(database_url(source, "postgres"), autocommit=True) as connection:
        if connection.execute("SELECT 1 FROM pg_database WHERE datname = %s", [target_name]).fetchone():
            raise SystemExit(f"{target_name} exists already: drop it first (the clone never overwrites)")
        deadline = time.monotonic() + 60
        while True:
            try:
                connection.execute(f'CREATE DATABASE "{target_name}" TEMPLATE "{source_name}"')
                return "CREATE DATABASE ... TEMPLATE"
            except psycopg.errors.ObjectInUse:
                if time.monotonic() > deadline:
                    break
                time.sleep(2)
        connection.execute(f'CREATE DATABASE "{target_name}"')
    subprocess.run(f"pg_dump -Fc '{source}' | pg_restore --no-owner -d '{target}'", shell=True, check=True)
    return "pg_dump | pg_restore (the source had other connections)"


def row(cursor: psycopg.Cursor[Any]) -> tuple[Any, ...]:
    found = cursor.fetchone()
    assert found is not None, "an aggregate returns one row"
    return tuple(found)


def references(cursor: psycopg.Cursor[Any]) -> dict[tuple[str, str], str]:
    """(table, column) -> the table its foreign key points at."""
    rows = cursor.execute(
        """SELECT conrelid::regclass::text, a.attname, confrelid::regclass::text FROM pg_constraint c
           JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = c.conkey[1] WHERE c.contype = 'f'"""
    ).fetchall()
    return {(table, column): target for table, column, target in rows}


def columns(cursor: psycopg.Cursor[Any], table: str) -> list[tuple[str, str]]:
    return cursor.execute(
        "SELECT column_name, data_type FROM information_schema.columns WHERE table_schema = 'public' "
        "AND table_name = %s ORDER BY ordinal_position",
        [table],
    ).fetchall()


def new_uuid(column: str, copy: int, shift_ms: int) -> str:
    """A version 7 UUID for the copy: the original's milliseconds shifted back, md5 bits after them."""
    bits = f"md5({column}::text || '/{copy}')"
    original = f"('x' || lpad(substr(replace({column}::text, '-', ''), 1, 12), 16, '0'))::bit(64)::bigint"
    millis = f"greatest({original} - {shift_ms}, 0)"
    return f"(lpad(to_hex({millis}), 12, '0') || '7' || substr({bits}, 1, 3) || '8' || substr({bits}, 4, 15))::uuid"


def copy_sql(
    cursor: psycopg.Cursor[Any],
    table: str,
    copy: int,
    offsets: dict[str, int],
    shift: timedelta,
    refs: dict[tuple[str, str], str],
    origin: datetime,
) -> str:
    """INSERT ... SELECT of one copy of a table: keys remapped, times shifted, unique texts made new."""
    shift_ms = int(shift.total_seconds() * 1000)
    special = {
        ("accounts_contributor", "handle"): f"handle || '-x{copy}'",
        ("accounts_contributor", "handle_key"): f"handle_key || '-x{copy}'",
        ("accounts_publickey", "keyid"): f"left(encode(sha256(convert_to(keyid || '/{copy}', 'UTF8')), 'hex'), 64)",
        (
            "results_submission",
            "payload_sha256",
        ): f"encode(sha256(convert_to(payload_sha256 || '/{copy}', 'UTF8')), 'hex')",
        (
            "results_submission",
            "measured_sha256",
        ): f"encode(sha256(convert_to(measured_sha256 || '/{copy}', 'UTF8')), 'hex')",
    }
    names, values = [], []
    for name, kind in columns(cursor, table):
        target = refs.get((table, name), table if name == "id" else None)
        if (table, name) in special:
            value = special[table, name]
        elif target in COPIED and kind == "uuid":
            value = new_uuid(name, copy, shift_ms)
        elif target in COPIED:
            value = f"{name} + {copy * offsets[target]}"
        elif kind == "timestamp with time zone":
            value = f"{name} - interval '{shift_ms} milliseconds'"
        else:
            value = name
        names.append(name)
        values.append(value)
    # Only the original rows are copied, never an earlier copy: those keyed by uuid are the ones
    # received since the state began (copies lie at least a span earlier), the others the first key range.
    original = f"received_at >= '{origin.isoformat()}'" if table in UUID_KEYED else f"id <= {offsets[table]}"
    return f"INSERT INTO {table} ({', '.join(names)}) SELECT {', '.join(values)} FROM {table} WHERE {original}"


def run(source: str, target: str, copies: int) -> None:
    if not target.rsplit("/", 1)[1].startswith("bh_perf_") or source == target:
        raise SystemExit("the clone writes only a new database named bh_perf_*, never its source")
    lines = []
    with psycopg.connect(source) as connection:
        [source_bytes] = row(connection.execute("SELECT pg_database_size(current_database())"))
    free = shutil.disk_usage("/work").free
    need = source_bytes * copies
    lines.append(f"disk: {free / 2**30:.1f} GiB free, the clone needs about {need / 2**30:.1f} GiB")
    if free - need < KEEP_FREE_BYTES:
        raise SystemExit(f"{lines[-1]}: less than {KEEP_FREE_BYTES / 2**30:.0f} GiB would remain; not cloning")
    started = time.perf_counter()
    how = create_from_template(source, target)
    lines.append(f"{how}: {time.perf_counter() - started:.1f} s")
    with psycopg.connect(target, autocommit=True) as connection, connection.cursor() as cursor:
        # The copies are consistent by construction: no per-row foreign-key triggers (Django's
        # constraints are deferred, so each copy's COMMIT would check tens of millions of rows).
        cursor.execute("SET session_replication_role = replica")
        refs = references(cursor)
        offsets = {
            table: row(cursor.execute(f"SELECT coalesce(max(id), 0) FROM {table}"))[0]
            for table in COPIED
            if table not in UUID_KEYED
        }
        low, high = row(cursor.execute("SELECT min(received_at), max(received_at) FROM results_submission"))
        span = timedelta(hours=1) + (high - low)
        for copy in range(1, copies):
            if shutil.disk_usage("/work").free < KEEP_FREE_BYTES:
                lines.append(f"stopped before copy {copy}: less than {KEEP_FREE_BYTES / 2**30:.0f} GiB free")
                break
            started = time.perf_counter()
            with connection.transaction():
                timings = []
                for table in COPIED:
                    step = time.perf_counter()
                    cursor.execute(copy_sql(cursor, table, copy, offsets, span * copy, refs, low))
                    timings.append(f"{table.split('_', 1)[1]} {cursor.rowcount} {time.perf_counter() - step:.0f} s")
            lines.append(f"copy {copy}: {time.perf_counter() - started:.0f} s ({'; '.join(timings)})")
            print(lines[-1], flush=True)
        for table in COPIED:
            if table not in UUID_KEYED:
                cursor.execute(f"SELECT setval(pg_get_serial_sequence('{table}', 'id'), (SELECT max(id) FROM {table}))")
        step = time.perf_counter()
        cursor.execute("VACUUM ANALYZE")
        lines.append(f"VACUUM ANALYZE: {time.perf_counter() - step:.0f} s")
        [size] = row(cursor.execute("SELECT pg_database_size(current_database())"))
        lines.append(f"database size after the copies: {size / 2**30:.2f} GiB")
    report(f"clone: {target.rsplit('/', 1)[1]} from {source.rsplit('/', 1)[1]} x{copies}", lines)


def refresh() -> None:
    """Every group's cells recomputed (setup() has pointed Django at the clone)."""
    from django.db import connection

    from benchhub.results import cells
    from benchhub.results.models import Submission

    started = time.perf_counter()
    refreshed = cells.refresh_all_cells()
    seconds = time.perf_counter() - started
    lines = [f"refresh_all_cells: {refreshed} cells of {len(cells.all_groups())} groups in {seconds:.0f} s"]
    with connection.cursor() as cursor:
        cursor.execute("VACUUM ANALYZE")
        cursor.execute("SELECT pg_database_size(current_database())")
        size = cursor.fetchone()[0]
    lines.append(
        f"database size: {size / 2**30:.2f} GiB; {shutil.disk_usage('/work').free / 2**30:.1f} GiB free on /work"
    )
    machines = Submission.objects.values("key").distinct().count()
    report(f"clone: {Submission.objects.count()} submissions, {machines} machines (keys)", lines)
