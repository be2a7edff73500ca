"""Rewrite the normalised rows of every submission from its raw envelope with COPY: the PostgreSQL
path of `manage.py rebuild_cells` (the ORM path, `storage.store_many`, serves SQLite).

The submissions are cut into ranges of their primary key; each range is one transaction that locks
its submissions, deletes their old rows and COPYs the new ones, so a crash leaves every submission
with either its old or its new rows, and running again fixes all of them. Ranges are spread over
worker processes, each holding one range in memory at a time. The rows come from
`storage.normalised_rows`, the derivation the ingest path writes through the ORM.
"""

from __future__ import annotations

import functools
import json
import multiprocessing
import os
from collections.abc import Iterable, Iterator
from typing import Any
from uuid import UUID

from django.db import connection, models, transaction
from psycopg.types.json import Jsonb

from benchhub.results import cell_keys, measurements, rebuild_worker, storage
from benchhub.results.models import (
    CorrectnessCheck,
    GenerationCheck,
    Measurement,
    Submission,
    SubmissionVariant,
    SweepRow,
    SweepRun,
)

# A range of primary keys: lower bound included, upper bound excluded; None is unbounded.
KeyRange = tuple[UUID | None, UUID | None]

SUBMISSION_FACTS = """
    SELECT s.id, s.hidden, s.flags::text, s.campaign_id, s.contributor_id, m.chip, m.gpu_cores, f.file_type, r.body
    FROM results_submission s
    JOIN results_machine m ON m.id = s.machine_id
    JOIN results_modelfile f ON f.id = s.model_file_id
    LEFT JOIN results_rawenvelope r ON r.submission_id = s.id
    WHERE (%(lower)s::uuid IS NULL OR s.id >= %(lower)s) AND (%(upper)s::uuid IS NULL OR s.id < %(upper)s)
    ORDER BY s.id
    FOR SHARE OF s
"""
# Locked FOR SHARE: a moderator hiding one of these submissions waits for this range's commit (and
# then rebuilds its measurements itself), or commits first and this range reads the new state.

# Children first, so nothing is left pointing at a deleted row (the constraints are checked at commit).
DELETES = (
    f"DELETE FROM {SweepRow._meta.db_table} WHERE run_id IN "
    f"(SELECT id FROM {SweepRun._meta.db_table} WHERE submission_id = ANY(%s))",
    *(
        f"DELETE FROM {model._meta.db_table} WHERE submission_id = ANY(%s)"
        for model in (Measurement, CorrectnessCheck, GenerationCheck, SweepRun, SubmissionVariant)
    ),
)


class Table:
    """The tuples COPY writes into one table: key columns first, then the builder's fields."""

    def __init__(self, model: type[models.Model], keys: tuple[str, ...]) -> None:
        self.model, self.keys = model, keys
        self.json_columns = {f.attname for f in model._meta.concrete_fields if isinstance(f, models.JSONField)}
        self.columns: tuple[str, ...] = ()
        self.json_flags: list[bool] = []
        self.rows: list[tuple[Any, ...]] = []

    def add(self, keys: tuple[Any, ...], fields: dict[str, Any]) -> None:
        if not self.columns:
            self.columns = (*self.keys, *fields)
            self.json_flags = [name in self.json_columns for name in fields]
        values: Iterable[Any] = fields.values()
        if self.json_columns:
            values = [
                Jsonb(value) if is_json else value for value, is_json in zip(values, self.json_flags, strict=True)
            ]
        self.rows.append((*keys, *values))

    def copy(self, cursor: Any) -> None:
        if not self.rows:
            return
        with cursor.copy(f"COPY {self.model._meta.db_table} ({', '.join(self.columns)}) FROM STDIN") as copy:
            for row in self.rows:
                copy.write_row(row)


def _reserve_ids(cursor: Any, model: type[models.Model], count: int) -> Iterator[int]:
    """Ids taken from the table's own sequence, so rows written now and by the ingest meanwhile never collide."""
    sequence = f"pg_get_serial_sequence('{model._meta.db_table}', 'id')"
    rows = cursor.execute(f"SELECT nextval({sequence}) FROM generate_series(1, %s)", [count]).fetchall()
    return iter(row[0] for row in rows)


def write_rows(cursor: Any, derived: list[tuple[UUID, storage.NormalisedRows]]) -> None:
    """COPY the normalised rows of these submissions (already stored themselves) with psycopg's
    `cursor`: ids reserved from the tables' sequences, one COPY per table. The ingest path writes
    its one submission this way on PostgreSQL, the rebuild a chunk."""
    cell_keys.number_rows(cursor, [fields for _, rows in derived for fields in rows.measurements])
    variant_ids = _reserve_ids(cursor, SubmissionVariant, sum(len(rows.variants) for _, rows in derived))
    run_ids = _reserve_ids(cursor, SweepRun, sum(len(rows.runs) for _, rows in derived))
    tables = {
        name: Table(model, keys)
        for name, model, keys in (
            ("variants", SubmissionVariant, ("id", "submission_id")),
            ("runs", SweepRun, ("id", "submission_id", "variant_id")),
            ("sweep_rows", SweepRow, ("run_id",)),
            ("correctness", CorrectnessCheck, ("submission_id", "variant_id")),
            ("generation", GenerationCheck, ("submission_id", "variant_id")),
            ("measurements", Measurement, ("submission_id", "variant_id")),
        )
    }
    for submission_id, rows in derived:
        by_name = {}
        for fields in rows.variants:
            by_name[fields["name"]] = variant_id = next(variant_ids)
            tables["variants"].add((variant_id, submission_id), fields)
        for variant, fields, sweep_rows in rows.runs:
            run_id = next(run_ids)
            tables["runs"].add((run_id, submission_id, by_name[variant]), fields)
            for row in sweep_rows:
                tables["sweep_rows"].add((run_id,), row)
        for name in ("correctness", "generation"):
            for variant, fields in getattr(rows, name):
                tables[name].add((submission_id, by_name[variant]), fields)
        for fields in rows.measurements:
            tables["measurements"].add((submission_id, by_name[fields["variant_name"]]), fields)
    for table in tables.values():
        table.copy(cursor)


def rebuild_range(key_range: KeyRange) -> int:
    """Re-derive the rows of the submissions in `key_range` in one transaction; returns how many."""
    lower, upper = key_range
    with transaction.atomic(), connection.cursor() as wrapper:
        cursor = wrapper.cursor  # psycopg's own cursor: COPY is not part of Django's API
        found = cursor.execute(SUBMISSION_FACTS, {"lower": lower, "upper": upper}).fetchall()
        if not found:
            return 0
        derived = []
        for submission_id, hidden, flags, campaign, contributor, chip, gpu_cores, quant, body in found:
            if body is None:
                raise LookupError(f"Submission {submission_id} has no raw envelope to rebuild its rows from.")
            facts = measurements.SubmissionFacts(
                hidden, json.loads(flags), campaign, contributor, chip, gpu_cores, quant
            )
            derived.append((submission_id, storage.normalised_rows(facts, storage.stored_payload(bytes(body)))))
        del found
        ids = [submission_id for submission_id, _ in derived]
        for statement in DELETES:
            cursor.execute(statement, [ids])
        write_rows(cursor, derived)
        del derived
    return len(ids)


def key_ranges(chunk: int) -> list[KeyRange]:
    """Consecutive ranges of about `chunk` submissions covering every key, also those not yet stored."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT id FROM (SELECT id, row_number() OVER (ORDER BY id) AS n FROM {Submission._meta.db_table}) "
            "AS numbered WHERE (n - 1) %% %s = 0 AND n > 1 ORDER BY id",
            [chunk],
        )
        starts: list[UUID | None] = [None, *(row[0] for row in cursor.fetchall())]
    return list(zip(starts, [*starts[1:], None], strict=True))


def rebuild_all(workers: int, chunk: int) -> int:
    """Rebuild every submission's rows, `chunk` submissions per transaction, in `workers`
    processes. In this process and its connection when `workers` is 1 or when the caller holds a
    transaction open (other processes could not see what it has not committed). Returns how many
    submissions."""
    ranges = key_ranges(chunk)
    done = 0
    if workers <= 1 or connection.in_atomic_block:
        for key_range in ranges:
            done += rebuild_range(key_range)
        return done
    database = {name: connection.settings_dict[name] for name in ("NAME", "USER", "PASSWORD", "HOST", "PORT")}
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "benchhub.settings")
    with multiprocessing.get_context("spawn").Pool(workers) as pool:
        for count in pool.imap_unordered(functools.partial(rebuild_worker.rebuild_range, database), ranges):
            done += count
    return done
