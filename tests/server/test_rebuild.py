"""`manage.py rebuild_cells`: the measurements (by default) or every normalised row (--all-rows)
re-derived from the raw envelopes give exactly the rows and cells the ingest path wrote, on
PostgreSQL's COPY path (in process and in worker processes) and on SQLite's ORM path. On
PostgreSQL the rows go into fresh tables swapped in at the end: a failure before the swap leaves
the live rows as they were and running again repairs everything; submissions received or moderated
meanwhile keep their rows; the schema after the swap is the one the migrations made."""

from __future__ import annotations

import io
import json
import threading
import time
from pathlib import Path
from typing import Any
from uuid import UUID

import psycopg
import pytest
from benchhub_agent import envelope
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection

from benchhub.results import cells, fresh_tables, moderation
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
from tests.conftest import Api, build_payload, persona
from tests.server.sqlite_process import run_on_fresh_sqlite

Snapshot = dict[str, list[tuple[Any, ...]]]

# A rebuild renumbers variants and sweep runs: a reference to one is compared by what identifies it.
RENUMBERED = {SubmissionVariant: ("name",), SweepRun: ("submission_id", "seq")}
SNAPSHOT_MODELS: dict[str, type[Any]] = {
    "variants": SubmissionVariant,
    "runs": SweepRun,
    "sweep_rows": SweepRow,
    "correctness": CorrectnessCheck,
    "generation": GenerationCheck,
    "measurements": Measurement,
    "cells": LeaderboardCell,
}


def snapshot_fields(model: type[Any]) -> tuple[str, ...]:
    """Every column of a derived table but its own id and a cell's write marks, references to
    renumbered rows replaced by what identifies those rows."""
    fields: list[str] = []
    for field in model._meta.concrete_fields:
        if field.primary_key or (model is LeaderboardCell and field.name in LeaderboardCell.WRITE_MARKS):
            continue
        identity = RENUMBERED.get(field.related_model) if field.is_relation else None
        if identity:
            fields.extend(f"{field.name}__{part}" for part in identity)
        else:
            fields.append(field.attname)
    return tuple(fields)


def snapshot() -> Snapshot:
    return {
        name: sorted(
            (
                tuple(json.dumps(value, sort_keys=True, default=str) for value in row)
                for row in model.objects.values_list(*snapshot_fields(model))
            ),
        )
        for name, model in SNAPSHOT_MODELS.items()
    }


def submit_variety(api: Api) -> list[str]:
    """Submissions that exercise every rule: two contributors, three variants, other chips and
    quants, a failed correctness check, degenerate output, a nonstandard sweep."""
    ada, bob = persona("ada"), persona("bob")
    assert api.register(bob, "bob").status_code == 201
    three = {"upstream": {1: [50.0, 52.0], 4: [100.0, 101.0]}, "01": {1: [51.0, 51.5], 4: [150.0, 149.0]}}
    three["01+02"] = {1: [55.0, 56.0], 4: [170.0, 171.5]}
    payloads = [
        (ada, build_payload()),
        (bob, build_payload(tg=three)),
        (ada, build_payload(tg=three, machine={"chip": "Apple M4 Max", "gpu_cores": 40})),
        (bob, build_payload(model={"file_type": "IQ3_XXS", "sha256": "e" * 64})),
        (ada, build_payload(machine={"chip": "Intel Xeon", "gpu_cores": None, "backend": "cpu"})),
        (bob, build_payload(correctness={"01": "fail"})),
        (ada, build_payload(correctness={"01": "not_run"}, degenerate={"01": True})),
        (bob, build_payload(degenerate={"01": True, "upstream": True})),
        (
            ada,
            build_payload(
                tg={"upstream": {4: [148.0, 148.0], 32: [300.0, 300.0]}, "01": {4: [210.0] * 2, 32: [310.0] * 2}}
            ),
        ),
        (bob, build_payload(tg={"upstream": {4: [100.0, 100.0]}, "01": {4: [900.0, 900.0]}})),
    ]
    ids = []
    for signer, payload in payloads:
        response = api.submit(payload, signer)
        assert response.status_code == 201, response.json()
        ids.append(response.json()["id"])
    return ids


def ingest_state(api: Api, admin_user: Any) -> Snapshot:
    """The variety, its outlier hidden by a moderator, and the cells of what the ingest stored."""
    ids = submit_variety(api)
    assert moderation.set_hidden(Submission.objects.filter(pk=ids[-1]), True, admin_user, "implausible") == 1
    cells.refresh_all_cells()
    state = snapshot()
    assert {row[-1] for row in state["measurements"]} >= {
        json.dumps(reason) for reason in ("", "hidden", "correctness_failed", "degenerate_output", "nonstandard_sweep")
    }, "the variety covers every exclusion rule"
    return state


def damage_the_derived_rows(all_rows: bool = True) -> None:
    """What a rebuild must repair: wrong numbers, missing rows, stale and ghost cells (and, for a
    rebuild of every row, missing normalised rows: a rebuild of the measurements derives them from
    the envelopes, not from those)."""
    Measurement.objects.update(tg_tps=-1.0, excluded_reason="")
    Measurement.objects.filter(batch_size=1).delete()
    if all_rows:
        SweepRow.objects.filter(batch_size=1).delete()
        GenerationCheck.objects.filter(variant__name="01").delete()
    LeaderboardCell.objects.update(speedup=-1.0)
    campaign = Submission.objects.values_list("campaign_id", flat=True)[0]
    LeaderboardCell.objects.create(campaign_id=campaign, chip="ghost", quant="Q", variant="x", batch_size=1)


def normalised_row_ids() -> dict[str, list[int]]:
    """The ids of the rows a rebuild of the measurements keeps as they are."""
    kept = (SubmissionVariant, SweepRun, SweepRow, CorrectnessCheck, GenerationCheck)
    return {model.__name__: sorted(model.objects.values_list("pk", flat=True)) for model in kept}


@pytest.mark.django_db
@pytest.mark.parametrize("all_rows", [False, True])
def test_it_rebuilds_exactly_the_rows_and_cells_the_ingest_wrote(
    api: Api, ada: envelope.Signer, admin_user: Any, all_rows: bool
) -> None:
    expected = ingest_state(api, admin_user)
    damage_the_derived_rows(all_rows)
    assert snapshot() != expected
    kept = normalised_row_ids()

    call_command("rebuild_cells", workers=1, chunk=3, all_rows=all_rows, stdout=io.StringIO())

    assert snapshot() == expected
    assert (normalised_row_ids() == kept) is not all_rows, "rewritten (renumbered) exactly when asked"
    assert Submission.objects.get(hidden=True).measurements.exclude(excluded_reason="hidden").count() == 0
    assert not Submission.objects.filter(cells_refreshed_at__isnull=True).exists()


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("all_rows", [False, True])
def test_it_rebuilds_the_same_rows_in_worker_processes(
    api: Api, ada: envelope.Signer, admin_user: Any, all_rows: bool
) -> None:
    expected = ingest_state(api, admin_user)
    damage_the_derived_rows(all_rows)

    call_command("rebuild_cells", workers=2, chunk=2, all_rows=all_rows, stdout=io.StringIO())

    assert snapshot() == expected


@pytest.mark.django_db(transaction=True)
def test_a_missing_variant_stops_the_measurements_rebuild_with_a_sentence_and_every_row_repairs_it(
    api: Api, ada: envelope.Signer, admin_user: Any
) -> None:
    expected = ingest_state(api, admin_user)
    broken = SubmissionVariant.objects.filter(name="01").order_by("pk").first()
    assert broken is not None
    broken.delete()  # its measurements, sweep runs and checks go with it
    damaged = snapshot()

    with pytest.raises(CommandError, match=r"has no stored variant '01'.*--all-rows"):
        call_command("rebuild_cells", workers=2, chunk=2, stdout=io.StringIO())
    assert snapshot() == damaged, "the live rows, untouched"
    assert fresh_leftovers() == []

    call_command("rebuild_cells", workers=2, chunk=2, all_rows=True, stdout=io.StringIO())
    assert snapshot() == expected


def fresh_leftovers() -> list[str]:
    """What a rebuild that stopped before its end leaves: fresh or retired tables, the change notes,
    the trigger."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT relname FROM pg_class WHERE strpos(relname, %s) > 0 OR strpos(relname, %s) > 0 OR relname = %s "
            "UNION SELECT tgname FROM pg_trigger WHERE tgname = %s ORDER BY 1",
            [fresh_tables.SUFFIX, fresh_tables.RETIRED, fresh_tables.CHANGES, fresh_tables.NOTE_CHANGE],
        )
        return [row[0] for row in cursor.fetchall()]


@pytest.mark.django_db(transaction=True)
def test_a_failure_before_the_swap_leaves_the_live_rows_and_a_rerun_repairs_everything(
    api: Api, ada: envelope.Signer, admin_user: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    expected = ingest_state(api, admin_user)
    damage_the_derived_rows(all_rows=False)
    damaged = snapshot()
    refused = sorted(Submission.objects.values_list("pk", flat=True))[4]
    create = fresh_tables.create

    def create_refusing_one_submission(cursor: Any, layout: fresh_tables.Layout) -> None:
        """The database refuses one submission's fresh measurements: its chunk fails in its last COPY."""
        create(cursor, layout)
        cursor.execute(
            "CREATE FUNCTION test_refuse_measurement() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
            f"IF NEW.submission_id = '{UUID(str(refused))}' THEN RAISE EXCEPTION 'injected failure'; END IF; "
            "RETURN NEW; END $$"
        )
        cursor.execute(
            f"CREATE TRIGGER test_refuse_measurement BEFORE INSERT ON {fresh_tables.fresh_name(Measurement)} "
            "FOR EACH ROW EXECUTE FUNCTION test_refuse_measurement()"
        )

    monkeypatch.setattr(fresh_tables, "create", create_refusing_one_submission)
    with pytest.raises(psycopg.errors.RaiseException, match="injected failure"):
        call_command("rebuild_cells", workers=1, chunk=1, stdout=io.StringIO())
    monkeypatch.undo()

    assert snapshot() == damaged, "the live rows, untouched"
    assert fresh_leftovers() == [], "dropped on the way out"
    with connection.cursor() as cursor:
        cursor.execute("DROP FUNCTION test_refuse_measurement()")
        # A run killed before its swap leaves its tables and trigger for the next run to drop (a run
        # of every row leaves all six tables).
        fresh_tables.create(cursor.cursor, fresh_tables.read_layout(cursor.cursor, fresh_tables.DERIVED))
    assert fresh_leftovers()

    call_command("rebuild_cells", workers=1, chunk=1, stdout=io.StringIO())
    assert snapshot() == expected
    assert fresh_leftovers() == []


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("meanwhile", ["while indexing", "just before the swap"])
@pytest.mark.parametrize("all_rows", [False, True])
def test_submissions_received_and_moderated_during_a_rebuild_keep_their_rows(
    api: Api, ada: envelope.Signer, admin_user: Any, monkeypatch: pytest.MonkeyPatch, meanwhile: str, all_rows: bool
) -> None:
    """Changes after their chunk was derived: caught up before the swap, or under its locks."""
    ingest_state(api, admin_user)
    submitted = Submission.objects.order_by("pk").values_list("pk", flat=True)
    shown, hidden = Submission.objects.get(pk=submitted[0]), Submission.objects.get(hidden=True)
    expected: list[Snapshot] = []
    step = "build" if meanwhile == "while indexing" else "swap"
    original = getattr(fresh_tables, step)

    def with_changes_first(*args: Any) -> Any:
        response = api.submit(build_payload(machine={"chip": "Apple M3 Pro", "gpu_cores": 18}), ada)
        assert response.status_code == 201, response.json()
        moderation.set_hidden([shown], True, admin_user, "meanwhile")
        moderation.set_hidden([hidden], False, admin_user, "meanwhile")
        cells.refresh_all_cells()
        expected.append(snapshot())  # what the ingest and the moderators wrote into the live tables
        return original(*args)

    monkeypatch.setattr(fresh_tables, step, with_changes_first)
    output = io.StringIO()
    call_command("rebuild_cells", workers=2, chunk=2, all_rows=all_rows, stdout=output)

    assert snapshot() == expected[0]
    assert "3 received or changed meanwhile derived again" in output.getvalue()
    assert Submission.objects.get(pk=shown.pk).measurements.filter(excluded_reason="hidden").exists()
    assert not Submission.objects.get(pk=hidden.pk).measurements.filter(excluded_reason="hidden").exists()
    assert fresh_leftovers() == []


def schema_of_the_derived_tables() -> list[tuple[Any, ...]]:
    """Every name and definition the migrations gave the derived tables, as the catalogue has them."""
    tables = [model._meta.db_table for model in fresh_tables.DERIVED]
    with connection.cursor() as cursor:
        cursor.execute(
            """
            SELECT 'column', c.relname, a.attnum::text, a.attname, format_type(a.atttypid, a.atttypmod),
                   a.attnotnull::text, a.attidentity::text, coalesce(pg_get_expr(d.adbin, d.adrelid), '')
            FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
            LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
            WHERE c.relname = ANY(%(tables)s) AND a.attnum > 0 AND NOT a.attisdropped
            UNION ALL
            SELECT 'index', c.relname, i.relname, pg_get_indexdef(x.indexrelid), '', '', '', ''
            FROM pg_index x JOIN pg_class c ON c.oid = x.indrelid JOIN pg_class i ON i.oid = x.indexrelid
            WHERE c.relname = ANY(%(tables)s)
            UNION ALL
            SELECT 'constraint', c.relname, k.conname, pg_get_constraintdef(k.oid), k.convalidated::text,
                   k.condeferrable::text, k.condeferred::text, ''
            FROM pg_constraint k JOIN pg_class c ON c.oid = k.conrelid WHERE c.relname = ANY(%(tables)s)
            UNION ALL
            SELECT 'table', c.relname, coalesce(array_to_string(c.reloptions, ','), ''),
                   pg_get_serial_sequence(c.relname, 'id'), '', '', '', ''
            FROM pg_class c WHERE c.relname = ANY(%(tables)s)
            ORDER BY 1, 2, 3, 4
            """,
            {"tables": tables},
        )
        return cursor.fetchall()


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("all_rows", [False, True])
def test_the_swapped_in_tables_have_every_name_and_definition_the_migrations_made(
    api: Api, ada: envelope.Signer, admin_user: Any, all_rows: bool
) -> None:
    ingest_state(api, admin_user)
    table = SweepRow._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute(f"ALTER TABLE {table} SET (fillfactor = 90)")  # a storage parameter to keep
    try:
        before = schema_of_the_derived_tables()
        assert ("table", table, "fillfactor=90", f"public.{table}_id_seq", "", "", "", "") in before
        call_command("rebuild_cells", workers=2, chunk=3, all_rows=all_rows, stdout=io.StringIO())
        after = schema_of_the_derived_tables()
    finally:
        with connection.cursor() as cursor:
            cursor.execute(f"ALTER TABLE {table} RESET (fillfactor)")
    assert after == before
    response = api.submit(build_payload(machine={"chip": "Apple M2"}), ada)
    assert response.status_code == 201, response.json()
    assert Measurement.objects.filter(submission_id=response.json()["id"]).exists()


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("holder", ["a reader", "a long holder"])
def test_the_swap_waits_for_a_lock_holder_without_failing_it_or_itself(
    api: Api, ada: envelope.Signer, admin_user: Any, monkeypatch: pytest.MonkeyPatch, holder: str
) -> None:
    """A reader holds the measurements past several of the swap's lock timeouts: the swap lets go
    and tries again until the reader is done. A holder (as an autovacuum would) past every short
    try of a shortened budget is outwaited by the longer try among them."""
    expected = ingest_state(api, admin_user)
    if holder == "a long holder":
        monkeypatch.setattr(fresh_tables, "LOCK_ATTEMPTS", 20)  # 19 short tries, then the long one
        hold = 20 * (fresh_tables.LOCK_TIMEOUT_MS / 1000 + 0.05) + 1.5  # past 20 short tries (pauses included)
    else:
        hold = 5 * fresh_tables.LOCK_TIMEOUT_MS / 1000
    holding, read = threading.Event(), []

    def slow_reader() -> None:
        with psycopg.connect(**connection.get_connection_params()) as own:
            read.append(own.execute(f"SELECT count(*) FROM {Measurement._meta.db_table}").fetchone())
            holding.set()
            time.sleep(hold)
            own.commit()

    swap = fresh_tables.swap

    def swap_once_the_reader_holds(*args: Any) -> int:
        reader.start()
        assert holding.wait(30)
        return swap(*args)

    reader = threading.Thread(target=slow_reader)
    monkeypatch.setattr(fresh_tables, "swap", swap_once_the_reader_holds)
    started = time.perf_counter()
    call_command("rebuild_cells", workers=1, chunk=5, stdout=io.StringIO())
    reader.join()
    assert read and read[0][0] > 0
    assert time.perf_counter() - started > hold - 0.5, "it waited for the holder"
    assert snapshot() == expected


@pytest.mark.django_db(transaction=True)
def test_a_holder_past_every_try_fails_the_command_with_a_sentence_and_leaves_the_live_rows(
    api: Api, ada: envelope.Signer, admin_user: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    expected = ingest_state(api, admin_user)
    monkeypatch.setattr(fresh_tables, "LOCK_ATTEMPTS", 2)
    with psycopg.connect(**connection.get_connection_params()) as own:
        own.execute(f"LOCK TABLE {Measurement._meta.db_table} IN ACCESS SHARE MODE")
        with pytest.raises(CommandError, match="held the derived tables through every try"):
            call_command("rebuild_cells", workers=1, chunk=5, stdout=io.StringIO())
    assert snapshot() == expected
    assert fresh_leftovers() == []


@pytest.mark.django_db
def test_it_refuses_to_drop_a_reference_it_would_not_keep(api: Api, ada: envelope.Signer) -> None:
    with connection.cursor() as cursor:
        cursor.execute(f"CREATE TABLE test_note (measurement_id bigint REFERENCES {Measurement._meta.db_table} (id))")
    with pytest.raises(CommandError, match="references or triggers a rebuild would drop: test_note_measurement_id"):
        call_command("rebuild_cells", workers=1, chunk=5, stdout=io.StringIO())


SQLITE_SCRIPT = """
import io, json, django
django.setup()
from django.contrib.auth.models import User
from django.core.management import call_command
from django.db import connection
from django.db import connection
from django.test import Client
from tests.conftest import Api, persona
from tests.server import test_rebuild as t

call_command("migrate", verbosity=0)
api = Api(Client())
assert api.register(persona("ada"), "ada").status_code == 201
expected = t.ingest_state(api, User.objects.create_superuser("admin", "admin@example.com", "x"))
t.damage_the_derived_rows()
damaged = t.snapshot()
output = io.StringIO()
call_command("rebuild_cells", stdout=output)
print(json.dumps({"vendor": connection.vendor, "output": output.getvalue(),
                  "damaged_differs": damaged != expected, "rebuilt_equal": t.snapshot() == expected}))
"""


def test_it_rebuilds_the_same_rows_through_the_orm_on_sqlite(tmp_path: Path) -> None:
    report = run_on_fresh_sqlite(tmp_path, SQLITE_SCRIPT, timeout=300)
    assert report["vendor"] == "sqlite"
    assert "Rebuilt 10 submission(s)" in report["output"]
    assert report["damaged_differs"] and report["rebuilt_equal"]
