"""Fresh tables for the PostgreSQL path of `manage.py rebuild_cells`: the derived tables it
rebuilds (the measurements, or with --all-rows all of DERIVED) are written again, from the raw
envelopes, into copies without indexes, which are then indexed, checked and swapped in for the
live ones.

Writing rows into tables with their indexes in place costs PostgreSQL an index entry per row at a
random page of each index; at a million submissions that upkeep was 90% of a rebuild's time
(docs/performance.md, section 4). Written bare and indexed afterwards, each index is one sort.

The live tables serve reads and the ingest until the swap. So that nothing received or moderated
meanwhile is lost, a trigger on the submission table notes every submission inserted, deleted or
changed in a fact its rows derive from (`CHANGES`), from before the first fresh row is written.
Those submissions are derived again (a catch-up) once the fresh tables are indexed, then once more
under the swap's locks, which are held only for the last few and the renames.

A crash before the swap leaves the live tables as they were; the next rebuild drops what the last
one left (`drop_leftovers`). The swap renames the live tables out of the way; they are dropped after
it commits, outside its locks. The swap keeps every name Django gave (tables, indexes, constraints,
identity sequences), so the schema after a rebuild is the one the migrations made.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import psycopg
from django.db import connection, models, transaction

from benchhub.results.models import (
    CorrectnessCheck,
    GenerationCheck,
    Measurement,
    Submission,
    SubmissionVariant,
    SweepRow,
    SweepRun,
)

# Parents before children: created and renamed in this order, dropped in the reverse.
DERIVED: tuple[type[models.Model], ...] = (
    SubmissionVariant,
    SweepRun,
    SweepRow,
    CorrectnessCheck,
    GenerationCheck,
    Measurement,
)
SUFFIX = "__fresh"
RETIRED = "__old"  # the live tables' names between the swap and their drop
CHANGES = "results_rebuild_changes"
NOTE_CHANGE = "results_rebuild_note_change"
# The submission's columns its rows derive from (measurements.SubmissionFacts; its machine's chip and
# GPU cores and its model's quant come from rows that never change).
FACT_COLUMNS = ("hidden", "flags", "campaign_id", "contributor_id", "machine_id", "model_file_id")
# Each statement that needs a lock waits at most this long, then lets go of every lock and tries again:
# shorter than PostgreSQL's deadlock_timeout (1 s), so a transaction waiting on us is never the one
# the deadlock check cancels. One try in 20 waits longer (with_lock_retries): then a cell refresh
# that reads the measurements and waits to mark its submissions could be cancelled instead; its
# submissions stay waiting and the sweeper queues them again.
LOCK_TIMEOUT_MS = 200
LONG_LOCK_TIMEOUT_MS = 3000
LOCK_ATTEMPTS = 300
# Per index build: one build runs per worker at once, so the rebuild holds at most that many times this.
INDEX_BUILD_MEMORY = "256MB"


def fresh_name(model: type[models.Model]) -> str:
    return f"{model._meta.db_table}{SUFFIX}"


def fresh_tables(rebuilt: tuple[type[models.Model], ...] = DERIVED) -> dict[type[models.Model], str]:
    """Where each rebuilt model's rows go during a rebuild."""
    return {model: fresh_name(model) for model in rebuilt}


@dataclass(frozen=True)
class Index:
    name: str  # Django's
    building_name: str  # on the fresh table until the swap
    retired_name: str  # on the live table from the swap to its drop
    create: str  # CREATE INDEX on the fresh table
    constraint: str  # "p", "u" for an index that backs a constraint of that kind, else ""
    constraint_suffix: str  # DEFERRABLE ... of that constraint


@dataclass(frozen=True)
class ForeignKey:
    table: str  # the fresh table holding it
    name: str  # Django's (a foreign key's name is the table's own, not the schema's)
    definition: str  # with the fresh names of the derived tables it references


@dataclass(frozen=True)
class Layout:
    """What the live tables a rebuild writes again have beside their columns, read from the catalogue."""

    rebuilt: tuple[type[models.Model], ...]  # those tables' models, in DERIVED's order
    indexes: dict[str, list[Index]]  # by live table
    foreign_keys: list[ForeignKey]
    sequences: dict[str, str]  # live table: its identity sequence's name
    reloptions: dict[str, list[str]]  # live table: its storage parameters


class RebuildRefused(Exception):
    """The schema holds something the swap would not keep."""


_SUBMISSIONS = Submission._meta.db_table


def _live(model: type[models.Model]) -> str:
    return model._meta.db_table


def read_layout(cursor: Any, rebuilt: tuple[type[models.Model], ...] = DERIVED) -> Layout:
    """The layout of the tables of `rebuilt` (DERIVED or some of it). Their references to other
    tables are kept as they are; another table's reference to one of them is refused."""
    rebuilt = tuple(model for model in DERIVED if model in rebuilt)
    live = [_live(model) for model in rebuilt]
    fresh = {name: f"{name}{SUFFIX}" for name in live}
    outside = cursor.execute(
        "SELECT conname, conrelid::regclass::text FROM pg_constraint "
        "WHERE contype = 'f' AND confrelid = ANY(%s::regclass[]) AND NOT conrelid = ANY(%s::regclass[])",
        [live, live],
    ).fetchall()
    triggers = cursor.execute(
        "SELECT tgname FROM pg_trigger WHERE tgrelid = ANY(%s::regclass[]) AND NOT tgisinternal", [live]
    ).fetchall()
    if outside or triggers:
        raise RebuildRefused(
            "The derived tables have references or triggers a rebuild would drop: "
            + ", ".join(row[0] for row in [*outside, *triggers])
        )
    indexes: dict[str, list[Index]] = {name: [] for name in live}
    for table, name, definition, kind, deferrable, deferred in cursor.execute(
        "SELECT i.indrelid::regclass::text, c.relname, pg_get_indexdef(i.indexrelid), "
        "coalesce(k.contype::text, ''), coalesce(k.condeferrable, false), coalesce(k.condeferred, false) "
        "FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
        "LEFT JOIN pg_constraint k ON k.conindid = i.indexrelid AND k.conrelid = i.indrelid "
        "WHERE i.indrelid = ANY(%s::regclass[]) ORDER BY 1, 2",
        [live],
    ).fetchall():
        building = f"{name[:48]}{SUFFIX}_{len(indexes[table])}"
        retired = f"{name[:48]}{RETIRED}_{len(indexes[table])}"
        head = re.match(r"CREATE (UNIQUE )?INDEX \S+ ON (ONLY )?\S+ USING ", definition)
        if head is None or kind not in ("", "p", "u"):
            raise RebuildRefused(f"Index {name} is of a kind a rebuild cannot copy: {definition}")
        create = f"CREATE {head.group(1) or ''}INDEX {building} ON {fresh[table]} USING {definition[head.end() :]}"
        suffix = (" DEFERRABLE" + (" INITIALLY DEFERRED" if deferred else "")) if deferrable else ""
        indexes[table].append(Index(name, building, retired, create, kind, suffix))
    foreign_keys = []
    for table, name, definition, referenced in cursor.execute(
        "SELECT conrelid::regclass::text, conname, pg_get_constraintdef(oid), confrelid::regclass::text "
        "FROM pg_constraint WHERE contype = 'f' AND conrelid = ANY(%s::regclass[]) ORDER BY 1, 2",
        [live],
    ).fetchall():
        if referenced in fresh:
            definition = definition.replace(f"REFERENCES {referenced}(", f"REFERENCES {fresh[referenced]}(")
        foreign_keys.append(ForeignKey(fresh[table], name, definition))
    sequences = {
        table: cursor.execute("SELECT pg_get_serial_sequence(%s, 'id')", [table]).fetchone()[0] for table in live
    }
    reloptions = dict(
        cursor.execute(
            "SELECT oid::regclass::text, coalesce(reloptions, '{}') FROM pg_class WHERE oid = ANY(%s::regclass[])",
            [live],
        ).fetchall()
    )
    return Layout(rebuilt, indexes, foreign_keys, sequences, reloptions)


def drop_leftovers(cursor: Any) -> None:
    """What a rebuild leaves when it stops before the end (a failure, a kill), and what the swap
    leaves to drop once it has committed: the trigger, the change notes, fresh or retired tables.
    Each step its own transaction (outside a caller's): dropping a table that references the
    submissions removes a trigger on them, under a lock that stops their readers too, so those
    references go first, each in a moment, and the files (seconds to unlink at a million
    submissions) go without it."""
    with_lock_retries(cursor, lambda: cursor.execute(f"DROP TRIGGER IF EXISTS {NOTE_CHANGE} ON {_SUBMISSIONS}"))
    cursor.execute(f"DROP FUNCTION IF EXISTS {NOTE_CHANGE}()")
    cursor.execute(f"DROP TABLE IF EXISTS {CHANGES}")
    names = [f"{_live(model)}{ending}" for ending in (SUFFIX, RETIRED) for model in DERIVED]
    tables = [row[0] for row in cursor.execute("SELECT relname FROM pg_class WHERE relname = ANY(%s)", [names])]
    if not tables:
        return
    for table, constraint in cursor.execute(
        "SELECT conrelid::regclass::text, conname FROM pg_constraint WHERE contype = 'f' "
        "AND conrelid = ANY(%s::regclass[]) AND NOT confrelid = ANY(%s::regclass[])",
        [tables, tables],
    ).fetchall():
        with_lock_retries(
            cursor,
            lambda table=table, constraint=constraint: cursor.execute(  # type: ignore[misc]
                f"ALTER TABLE {table} DROP CONSTRAINT {constraint}"
            ),
        )
    cursor.execute(f"DROP TABLE {', '.join(tables)}")


def _note_changes_function(body: str) -> str:
    return f"CREATE OR REPLACE FUNCTION {NOTE_CHANGE}() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN {body} END $$"


def create(cursor: Any, layout: Layout) -> None:
    """Bare fresh tables (columns, defaults, checks, identity), and the trigger that notes changed
    submissions from now on. The trigger is created first: its lock waits for every transaction
    writing submissions, so each change is either committed before any fresh row is read or noted."""
    cursor.execute(f"CREATE TABLE {CHANGES} (submission_id uuid NOT NULL)")
    old, new = ", ".join(f"OLD.{c}" for c in FACT_COLUMNS), ", ".join(f"NEW.{c}" for c in FACT_COLUMNS)
    cursor.execute(
        _note_changes_function(
            f"IF TG_OP = 'DELETE' THEN INSERT INTO {CHANGES} VALUES (OLD.id); "
            f"ELSIF TG_OP = 'INSERT' OR ({old}) IS DISTINCT FROM ({new}) THEN INSERT INTO {CHANGES} VALUES (NEW.id); "
            "END IF; RETURN NULL;"
        )
    )
    with_lock_retries(
        cursor,
        lambda: cursor.execute(
            f"CREATE TRIGGER {NOTE_CHANGE} AFTER INSERT OR DELETE OR UPDATE OF {', '.join(FACT_COLUMNS)} "
            f"ON {_SUBMISSIONS} FOR EACH ROW EXECUTE FUNCTION {NOTE_CHANGE}()"
        ),
    )
    for model in layout.rebuilt:
        live, fresh = _live(model), fresh_name(model)
        cursor.execute(f"CREATE TABLE {fresh} (LIKE {live} INCLUDING ALL EXCLUDING INDEXES)")
        if layout.reloptions[live]:
            cursor.execute(f"ALTER TABLE {fresh} SET ({', '.join(layout.reloptions[live])})")
        # Ids carry on from the live table's (nothing refers to the old ones once they are dropped).
        cursor.execute(
            "SELECT setval(pg_get_serial_sequence(%s, 'id'), (SELECT last_value FROM " + layout.sequences[live] + "))",
            [fresh],
        )


class Statements:
    """Runs DDL: on `parallel` connections of its own, one statement at a time each, in autocommit;
    with one, on the command's connection (always so inside a caller's open transaction, as in the
    tests: other connections cannot see what it has not committed)."""

    def __init__(self, parallel: int) -> None:
        self.parallel = 1 if connection.in_atomic_block else max(1, parallel)

    def run(self, statements: list[str]) -> None:
        if self.parallel == 1:
            with connection.cursor() as cursor:
                for statement in statements:
                    cursor.execute(statement)
            return
        with ThreadPoolExecutor(self.parallel) as pool:
            for _ in pool.map(self._run_on_own_connection, statements):
                pass

    @staticmethod
    def _run_on_own_connection(statement: str) -> None:
        with psycopg.connect(**connection.get_connection_params(), autocommit=True) as own:
            # One build per worker connection keeps the cores busy; PostgreSQL's own parallel workers would add more.
            own.execute(f"SET maintenance_work_mem = '{INDEX_BUILD_MEMORY}'")
            own.execute("SET max_parallel_maintenance_workers = 0")
            own.execute(statement)

    @property
    def outside_a_transaction(self) -> bool:
        return self.parallel > 1 or not connection.in_atomic_block


def build(layout: Layout, statements: Statements) -> dict[str, float]:
    """Index the filled fresh tables, give them their constraints and statistics; seconds per step."""
    seconds: dict[str, float] = {}
    started = time.perf_counter()
    # The largest tables' indexes first, so the two connections finish together.
    statements.run([index.create for model in reversed(layout.rebuilt) for index in layout.indexes[_live(model)]])
    seconds["indexes"] = time.perf_counter() - started
    kinds = {"p": "PRIMARY KEY", "u": "UNIQUE"}
    with connection.cursor() as wrapper:
        cursor = wrapper.cursor
        for model in layout.rebuilt:
            for index in layout.indexes[_live(model)]:
                if index.constraint:
                    cursor.execute(
                        f"ALTER TABLE {fresh_name(model)} ADD CONSTRAINT {index.building_name} "
                        f"{kinds[index.constraint]} USING INDEX {index.building_name}{index.constraint_suffix}"
                    )
        # NOT VALID first: adding a checked foreign key would hold a lock on the table it references
        # (the submissions, say) that stops the ingest for the whole check; VALIDATE holds none that does.
        for key in layout.foreign_keys:
            with_lock_retries(
                cursor,
                lambda key=key: cursor.execute(  # type: ignore[misc]
                    f"ALTER TABLE {key.table} ADD CONSTRAINT {key.name} {key.definition} NOT VALID"
                ),
            )
    started = time.perf_counter()
    statements.run([f"ALTER TABLE {key.table} VALIDATE CONSTRAINT {key.name}" for key in layout.foreign_keys])
    seconds["foreign keys"] = time.perf_counter() - started
    started = time.perf_counter()
    # The cell refresh reads measurements by index-only scans, which need the visibility map a VACUUM
    # writes; the others need their statistics. VACUUM cannot run inside a transaction.
    vacuum = "VACUUM (ANALYZE)" if statements.outside_a_transaction else "ANALYZE"
    statements.run([f"{vacuum if model is Measurement else 'ANALYZE'} {fresh_name(model)}" for model in layout.rebuilt])
    seconds["statistics"] = time.perf_counter() - started
    return seconds


Rederive = Callable[[Any, list[Any]], None]


def catch_up(cursor: Any, rederive: Rederive, batch: int) -> int:
    """Derive again, in the fresh tables, the submissions noted as changed; returns how many notes."""
    taken = cursor.execute(f"DELETE FROM {CHANGES} RETURNING submission_id").fetchall()
    if not taken:
        return 0
    ids = sorted({row[0] for row in taken})
    for start in range(0, len(ids), batch):
        rederive(cursor, ids[start : start + batch])
    return len(taken)


def swap(cursor: Any, layout: Layout, rederive: Rederive, batch: int) -> int:
    """In one transaction, under locks that stop writers of submissions and every user of the
    derived tables: the last catch-up, then the fresh tables take the live ones' places and names.
    Returns how many changed submissions it caught up."""

    def take_locks() -> None:
        # The ingest's and the moderators' order: the submission first, then its rows. EXCLUSIVE
        # stops writers of submissions and lets their readers on.
        cursor.execute(f"LOCK TABLE {_SUBMISSIONS} IN EXCLUSIVE MODE")
        cursor.execute(f"LOCK TABLE {', '.join(_live(m) for m in layout.rebuilt)} IN ACCESS EXCLUSIVE MODE")

    with_lock_retries(cursor, take_locks)
    caught = catch_up(cursor, rederive, batch)
    # Check the deferred foreign keys of the rows written so far now: a table with checks pending
    # cannot be dropped or altered.
    cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
    # Dropping the trigger here would need a lock that stops the submissions' readers too: it notes
    # nothing from now on, and is dropped after the commit (drop_leftovers).
    cursor.execute(_note_changes_function("RETURN NULL;"))
    # The live tables are renamed out of the way, not dropped: a drop here would hold the locks
    # while their files are unlinked, and take one on the submissions that stops their readers.
    for model in layout.rebuilt:
        live = _live(model)
        for index in layout.indexes[live]:
            cursor.execute(f"ALTER INDEX {index.name} RENAME TO {index.retired_name}")
        cursor.execute(
            f"ALTER SEQUENCE {layout.sequences[live]} RENAME TO {sequence_name_of(layout, live)[:50]}{RETIRED}"
        )
        cursor.execute(f"ALTER TABLE {live} RENAME TO {live}{RETIRED}")
    for model in layout.rebuilt:
        live, fresh = _live(model), fresh_name(model)
        sequence = cursor.execute("SELECT pg_get_serial_sequence(%s, 'id')", [fresh]).fetchone()[0]
        cursor.execute(f"ALTER TABLE {fresh} RENAME TO {live}")
        cursor.execute(f"ALTER SEQUENCE {sequence} RENAME TO {sequence_name_of(layout, live)}")
        for index in layout.indexes[live]:
            if index.constraint:
                cursor.execute(f"ALTER TABLE {live} RENAME CONSTRAINT {index.building_name} TO {index.name}")
            else:
                cursor.execute(f"ALTER INDEX {index.building_name} RENAME TO {index.name}")
    return caught


def sequence_name_of(layout: Layout, table: str) -> str:
    """The identity sequence's own name (the catalogue gives it with its schema)."""
    return layout.sequences[table].rpartition(".")[2]


def with_lock_retries(cursor: Any, take: Callable[[], None]) -> None:
    """Run `take`, whose statements wait at most LOCK_TIMEOUT_MS for each lock; on a timeout its
    savepoint is rolled back, which lets go of the locks it took, and it is tried again (for about
    two minutes in all, then the timeout is the command's error)."""
    for attempt in range(LOCK_ATTEMPTS):
        # Every so often one wait longer than deadlock_timeout: an autovacuum holding one of the
        # tables (it can take minutes on the measurements) gives way only to a waiter that old.
        timeout = LONG_LOCK_TIMEOUT_MS if attempt % 20 == 19 else LOCK_TIMEOUT_MS
        try:
            with transaction.atomic():
                cursor.execute(f"SET LOCAL lock_timeout = {timeout}")
                take()
                cursor.execute("SET LOCAL lock_timeout TO DEFAULT")
            return
        except psycopg.errors.LockNotAvailable:
            if attempt == LOCK_ATTEMPTS - 1:
                raise
        time.sleep(0.05)
