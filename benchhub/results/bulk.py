"""Write the normalised rows of submissions with COPY: the ingest's one submission into the live
tables, and on PostgreSQL every submission again from its raw envelope for `manage.py rebuild_cells`
(the ORM path, `storage.store_many`, serves SQLite).

A rebuild writes into fresh tables that are indexed and swapped in at the end (fresh_tables.py):
the measurements alone (`MEASUREMENTS`, the rows the rules make; the other tables hold what the
envelope says, normalised, with no rule applied), or with `all_rows` every derived table.
The submissions are cut into ranges of their primary key, spread over worker processes, each range
one transaction holding one range in memory at a time. The rows come from `storage.normalised_rows`,
the derivation the ingest path writes.
"""

from __future__ import annotations

import contextlib
import functools
import json
import time
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any
from uuid import UUID

import psycopg
from django.db import DatabaseError, connection, models, transaction
from psycopg.postgres import types as postgres_types
from psycopg.types.json import Jsonb

from benchhub.results import cell_keys, fresh_tables, measurements, rebuild_worker, storage
from benchhub.results.models import (
    CorrectnessCheck,
    GenerationCheck,
    LeaderboardCell,
    Measurement,
    Submission,
    SubmissionVariant,
    SweepRow,
    SweepRun,
)

# A catch-up that found at most this many changed submissions is followed by the swap, which does
# the last one under its locks: a few chunks' worth at most, a second or so of the ingest waiting.
CATCH_UP_UNDER_LOCK = 200
# A range of primary keys: lower bound included, upper bound excluded; None is unbounded.
KeyRange = tuple[UUID | None, UUID | None]
# What a rebuild writes again unless asked for every row.
MEASUREMENTS: tuple[type[models.Model], ...] = (Measurement,)

SUBMISSION_FACTS = """
    SELECT s.id, s.hidden, s.flags::text, s.campaign_id, s.contributor_id, m.chip, m.gpu_cores, f.file_type, r.body
    FROM results_submission s
    JOIN results_machine m ON m.id = s.machine_id
    JOIN results_modelfile f ON f.id = s.model_file_id
    LEFT JOIN results_rawenvelope r ON r.submission_id = s.id
"""
IN_RANGE = "WHERE (%(lower)s::uuid IS NULL OR s.id >= %(lower)s) AND (%(upper)s::uuid IS NULL OR s.id < %(upper)s)"
AMONG = "WHERE s.id = ANY(%(ids)s)"

# Where each derived model's rows are written: the live tables at ingest.
Tables = Mapping[type[models.Model], str]
LIVE: Tables = {model: model._meta.db_table for model in fresh_tables.DERIVED}


def _deletes(tables: Tables) -> tuple[str, ...]:
    """Every row of some submissions (`= ANY(%s)`), children first."""
    return (
        f"DELETE FROM {tables[SweepRow]} WHERE run_id IN "
        f"(SELECT id FROM {tables[SweepRun]} WHERE submission_id = ANY(%s))",
        *(
            f"DELETE FROM {tables[model]} WHERE submission_id = ANY(%s)"
            for model in (Measurement, CorrectnessCheck, GenerationCheck, SweepRun, SubmissionVariant)
        ),
    )


@functools.cache
def _column_types(model: type[models.Model]) -> dict[str, int]:
    """The PostgreSQL type (oid) of each column of the model's table, as its fields declare them
    ("varchar(64)" is a varchar): what a binary COPY must name."""
    declared = {field.column: field.db_type(connection) or "" for field in model._meta.concrete_fields}
    return {column: postgres_types[name.split("(")[0]].oid for column, name in declared.items()}


class Table:
    """The tuples COPY writes into one table: key columns first, then the builder's fields. Written
    in PostgreSQL's binary format: psycopg formats a row in ~0.4 µs instead of ~4 µs as text (~96
    rows a submission), and the server reads floats without parsing their digits."""

    def __init__(self, model: type[models.Model], keys: tuple[str, ...], name: str = "") -> None:
        self.model, self.keys, self.name = model, keys, name or model._meta.db_table
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
        types = _column_types(self.model)
        with cursor.copy(f"COPY {self.name} ({', '.join(self.columns)}) FROM STDIN (FORMAT BINARY)") as copy:
            copy.set_types([types[column] for column in self.columns])
            for row in self.rows:
                copy.write_row(row)


def _reserve_ids(cursor: Any, table: str, count: int) -> Iterator[int]:
    """Ids taken from the table's own sequence, so rows written now and by the ingest meanwhile never collide."""
    sequence = f"pg_get_serial_sequence('{table}', 'id')"
    rows = cursor.execute(f"SELECT nextval({sequence}) FROM generate_series(1, %s)", [count]).fetchall()
    return iter(row[0] for row in rows)


def write_rows(cursor: Any, derived: list[tuple[UUID, storage.NormalisedRows]], into: Tables = LIVE) -> None:
    """COPY the normalised rows of these submissions (already stored themselves) with psycopg's
    `cursor` into the tables `into` names: ids reserved from the tables' sequences, one COPY per
    table. The ingest path writes its one submission this way on PostgreSQL, the rebuild a chunk."""
    cell_keys.number_rows(cursor, [fields for _, rows in derived for fields in rows.measurements])
    variant_ids = _reserve_ids(cursor, into[SubmissionVariant], sum(len(rows.variants) for _, rows in derived))
    run_ids = _reserve_ids(cursor, into[SweepRun], sum(len(rows.runs) for _, rows in derived))
    tables = {
        name: Table(model, keys, into[model])
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


def _stored(cursor: Any, where: str, params: dict[str, Any]) -> list[tuple[UUID, measurements.SubmissionFacts, Any]]:
    """The facts and the payload of each submission `where` selects, from its raw envelope."""
    stored = []
    for submission_id, hidden, flags, campaign, contributor, chip, gpu_cores, quant, body in cursor.execute(
        f"{SUBMISSION_FACTS} {where} ORDER BY s.id", params
    ).fetchall():
        if body is None:
            raise LookupError(f"Submission {submission_id} has no raw envelope to rebuild its rows from.")
        facts = measurements.SubmissionFacts(hidden, json.loads(flags), campaign, contributor, chip, gpu_cores, quant)
        stored.append((submission_id, facts, storage.stored_payload(bytes(body))))
    return stored


def _derive(cursor: Any, where: str, params: dict[str, Any]) -> list[tuple[UUID, storage.NormalisedRows]]:
    """The normalised rows of the submissions `where` selects, from their raw envelopes."""
    return [(key, storage.normalised_rows(facts, payload)) for key, facts, payload in _stored(cursor, where, params)]


def write_measurements(cursor: Any, stored: list[tuple[UUID, measurements.SubmissionFacts, Any]], into: str) -> None:
    """COPY the measurement rows of these payloads into the table `into`, each pointing at its
    submission's stored variant of its name (the live one: a measurements-only rebuild keeps those)."""
    derived = [(key, storage.measurement_rows(facts, payload)) for key, facts, payload in stored]
    cell_keys.number_rows(cursor, [fields for _, rows in derived for fields in rows])
    variant_ids = {
        (submission_id, name): variant_id
        for submission_id, name, variant_id in cursor.execute(
            f"SELECT submission_id, name, id FROM {SubmissionVariant._meta.db_table} WHERE submission_id = ANY(%s)",
            [[key for key, _ in derived]],
        ).fetchall()
    }
    table = Table(Measurement, ("submission_id", "variant_id"), into)
    for submission_id, rows in derived:
        for fields in rows:
            variant = variant_ids.get((submission_id, fields["variant_name"]))
            if variant is None:
                raise LookupError(
                    f"Submission {submission_id} has no stored variant {fields['variant_name']!r}: "
                    "rebuild every row (rebuild_cells --all-rows)."
                )
            table.add((submission_id, variant), fields)
    table.copy(cursor)


def _write_again(cursor: Any, where: str, params: dict[str, Any], all_rows: bool) -> int:
    """Derive the submissions `where` selects into the fresh tables; returns how many."""
    if all_rows:
        derived = _derive(cursor, where, params)
        write_rows(cursor, derived, fresh_tables.fresh_tables())
        return len(derived)
    stored = _stored(cursor, where, params)
    write_measurements(cursor, stored, fresh_tables.fresh_name(Measurement))
    return len(stored)


def rebuild_range(task: tuple[KeyRange, bool]) -> int:
    """Derive the rows of the submissions in the key range into the fresh tables (every derived
    table's when the flag is set, else the measurements), in one transaction; returns how many
    submissions."""
    (lower, upper), all_rows = task
    with transaction.atomic(), connection.cursor() as wrapper:
        # psycopg's own cursor: COPY is not part of Django's API
        return _write_again(wrapper.cursor, IN_RANGE, {"lower": lower, "upper": upper}, all_rows)


def rederive(cursor: Any, ids: list[UUID], all_rows: bool) -> None:
    """Replace the fresh rows of these submissions with rows derived from what they are now (a
    submission deleted meanwhile keeps none)."""
    if all_rows:
        statements = _deletes(fresh_tables.fresh_tables())
    else:
        statements = (f"DELETE FROM {fresh_tables.fresh_name(Measurement)} WHERE submission_id = ANY(%s)",)
    for statement in statements:
        cursor.execute(statement, [ids])
    _write_again(cursor, AMONG, {"ids": ids}, all_rows)


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


@dataclass
class Rebuilt:
    submissions: int
    caught_up: int  # submissions received, moderated or deleted meanwhile, derived again
    seconds: dict[str, float]  # per step


def rebuild_all(workers: int, chunk: int, all_rows: bool = False) -> Rebuilt:
    """Rebuild every submission's measurements (`all_rows`: every derived row) into fresh tables,
    `chunk` submissions per transaction in `workers` processes, index them and swap them in for the
    live ones (results/fresh_tables.py).
    In this process and its connection when `workers` is 1 or when the caller holds a transaction
    open (other processes could not see what it has not committed)."""
    with connection.cursor() as wrapper:
        fresh_tables.drop_leftovers(wrapper.cursor)  # its own transactions (see there)
    with transaction.atomic(), connection.cursor() as wrapper:
        layout = fresh_tables.read_layout(wrapper.cursor, fresh_tables.DERIVED if all_rows else MEASUREMENTS)
        fresh_tables.create(wrapper.cursor, layout)
    try:
        rebuilt = _fill_and_swap(layout, workers, chunk, all_rows)
    except BaseException:
        # Nothing live was changed; what was made for the rebuild goes (or, in a caller's failed
        # transaction, goes with its rollback; after a kill, with the next rebuild's start).
        if not connection.in_atomic_block:
            with contextlib.suppress(DatabaseError, psycopg.Error), connection.cursor() as wrapper:
                fresh_tables.drop_leftovers(wrapper.cursor)
        raise
    started = time.perf_counter()
    with connection.cursor() as wrapper:
        fresh_tables.drop_leftovers(wrapper.cursor)
    rebuilt.seconds["old tables dropped"] = time.perf_counter() - started
    return rebuilt


def _fill_and_swap(layout: fresh_tables.Layout, workers: int, chunk: int, all_rows: bool) -> Rebuilt:
    seconds: dict[str, float] = {}
    again = functools.partial(rederive, all_rows=all_rows)  # what the catch-ups derive
    started = time.perf_counter()
    tasks = [(key_range, all_rows) for key_range in key_ranges(chunk)]
    done = 0
    if workers <= 1 or connection.in_atomic_block:
        for task in tasks:
            done += rebuild_range(task)
    else:
        done = rebuild_worker.total_in_processes(f"{__name__}.rebuild_range", tasks, workers)
    seconds["rows"] = time.perf_counter() - started
    seconds |= fresh_tables.build(layout, fresh_tables.Statements(workers))
    started = time.perf_counter()
    caught = 0
    while True:  # until what arrives while one catch-up runs is little enough to do under the locks
        with transaction.atomic(), connection.cursor() as wrapper:
            taken = fresh_tables.catch_up(wrapper.cursor, again, chunk)
        caught += taken
        if taken <= CATCH_UP_UNDER_LOCK:
            break
    seconds["catch-up"] = time.perf_counter() - started
    started = time.perf_counter()
    with transaction.atomic(), connection.cursor() as wrapper:
        caught += fresh_tables.swap(wrapper.cursor, layout, again, chunk)
        LeaderboardCell.objects.update(order_state=None)  # their elements are other rows now
    seconds["swap"] = time.perf_counter() - started
    return Rebuilt(done, caught, seconds)
