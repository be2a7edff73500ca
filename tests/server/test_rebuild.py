"""`manage.py rebuild_cells`: every normalised row re-derived from the raw envelopes gives exactly
the rows and cells the ingest path wrote, on PostgreSQL's COPY path (in process and in worker
processes) and on SQLite's ORM path; a failure mid-way leaves each submission with its old or its
new rows, never a mix, and running again repairs everything."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from uuid import UUID

import psycopg
import pytest
from benchhub_agent import envelope
from django.core.management import call_command
from django.db import connection

from benchhub.results import cells, moderation
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


def damage_the_derived_rows() -> None:
    """What a rebuild must repair: wrong numbers, missing rows, stale and ghost cells."""
    Measurement.objects.update(tg_tps=-1.0, excluded_reason="")
    SweepRow.objects.filter(batch_size=1).delete()
    GenerationCheck.objects.filter(variant__name="01").delete()
    LeaderboardCell.objects.update(speedup=-1.0)
    campaign = Submission.objects.values_list("campaign_id", flat=True)[0]
    LeaderboardCell.objects.create(campaign_id=campaign, chip="ghost", quant="Q", variant="x", batch_size=1)


@pytest.mark.django_db
def test_it_rebuilds_exactly_the_rows_and_cells_the_ingest_wrote(
    api: Api, ada: envelope.Signer, admin_user: Any
) -> None:
    expected = ingest_state(api, admin_user)
    damage_the_derived_rows()
    assert snapshot() != expected

    call_command("rebuild_cells", workers=1, chunk=3, stdout=io.StringIO())

    assert snapshot() == expected
    assert Submission.objects.get(hidden=True).measurements.exclude(excluded_reason="hidden").count() == 0
    assert not Submission.objects.filter(cells_refreshed_at__isnull=True).exists()


@pytest.mark.django_db(transaction=True)
def test_it_rebuilds_the_same_rows_in_worker_processes(api: Api, ada: envelope.Signer, admin_user: Any) -> None:
    expected = ingest_state(api, admin_user)
    damage_the_derived_rows()

    call_command("rebuild_cells", workers=2, chunk=2, stdout=io.StringIO())

    assert snapshot() == expected


def rows_per_submission() -> dict[str, dict[str, int]]:
    counts: dict[str, dict[str, int]] = {}
    for name, model in SNAPSHOT_MODELS.items():
        if model is LeaderboardCell:
            continue
        submission = "run__submission_id" if model is SweepRow else "submission_id"
        for submission_id in model.objects.values_list(submission, flat=True):
            per_table = counts.setdefault(str(submission_id), {})
            per_table[name] = per_table.get(name, 0) + 1
    return counts


@contextmanager
def measurements_refused_for(submission_id: str) -> Iterator[None]:
    """The database refuses this submission's measurements: its chunk fails in its last COPY,
    after its old rows were deleted and its other new rows written."""
    with connection.cursor() as cursor:
        cursor.execute(
            "CREATE FUNCTION test_refuse_measurement() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
            f"IF NEW.submission_id = '{UUID(submission_id)}' THEN RAISE EXCEPTION 'injected failure'; END IF; "
            "RETURN NEW; END $$"
        )
        cursor.execute(
            "CREATE TRIGGER test_refuse_measurement BEFORE INSERT ON results_measurement "
            "FOR EACH ROW EXECUTE FUNCTION test_refuse_measurement()"
        )
    try:
        yield
    finally:
        with connection.cursor() as cursor:
            cursor.execute("DROP TRIGGER test_refuse_measurement ON results_measurement")
            cursor.execute("DROP FUNCTION test_refuse_measurement()")


@pytest.mark.django_db
def test_a_failure_mid_way_leaves_old_or_new_rows_and_a_rerun_repairs_everything(
    api: Api, ada: envelope.Signer, admin_user: Any
) -> None:
    expected = ingest_state(api, admin_user)
    complete = rows_per_submission()
    damage_the_derived_rows()
    damaged = rows_per_submission()
    order = [str(pk) for pk in sorted(Submission.objects.values_list("pk", flat=True))]

    with measurements_refused_for(order[4]), pytest.raises(psycopg.errors.RaiseException, match="injected failure"):
        call_command("rebuild_cells", workers=1, chunk=1, stdout=io.StringIO())

    counts = rows_per_submission()
    for rebuilt in order[:4]:
        assert counts[rebuilt] == complete[rebuilt]
        assert not Measurement.objects.filter(submission_id=rebuilt, tg_tps=-1.0).exists()
    for kept in order[4:]:
        assert counts[kept] == damaged[kept], "the old rows, all of them"
        assert not Measurement.objects.filter(submission_id=kept).exclude(tg_tps=-1.0).exists()

    call_command("rebuild_cells", workers=1, chunk=1, stdout=io.StringIO())
    assert snapshot() == expected


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
