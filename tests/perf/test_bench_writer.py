"""The benchmark suite's writer (bench/copyrows.py: the large state and the ingest floor) stores what
the API stores: a payload written by it matches, column for column, the same payload posted through
the API, but for what names the submission (id, nonce, digest, times)."""

from __future__ import annotations

import uuid
from typing import Any

from benchhub_agent import envelope
from django.db import connection, models

from bench import copyrows
from benchhub.results.models import (
    CorrectnessCheck,
    GenerationCheck,
    Measurement,
    RawEnvelope,
    Submission,
    SubmissionVariant,
    SweepRow,
    SweepRun,
)
from tests.conftest import Api, build_payload

NAMING = {"id", "nonce", "payload_sha256", "received_at", "cells_refreshed_at"}
# Rows that point at a variant: compared by the variant's name, ids being the database's.
BY_VARIANT = (SweepRun, CorrectnessCheck, GenerationCheck, Measurement)


def _values(model: type[models.Model], skip: set[str]) -> list[str]:
    return [field.attname for field in model._meta.concrete_fields if field.attname not in skip]


def derived_rows(submission: Submission) -> dict[str, list[tuple[Any, ...]]]:
    """Every normalised row of the submission, without its ids."""
    ids = {"id", "submission_id", "variant_id", "run_id"}
    rows = {
        "variants": list(
            SubmissionVariant.objects.filter(submission=submission)
            .order_by("position")
            .values_list(*_values(SubmissionVariant, ids))
        ),
        "sweep_rows": sorted(
            SweepRow.objects.filter(run__submission=submission).values_list("run__seq", *_values(SweepRow, ids))
        ),
    }
    for model in BY_VARIANT:
        fields = ("variant__name", *_values(model, ids))
        rows[model.__name__] = sorted(model.objects.filter(submission=submission).values_list(*fields), key=repr)
    return rows


def test_the_bench_writer_stores_the_rows_the_api_stores(api: Api, ada: envelope.Signer, campaign: Any) -> None:
    payload = build_payload(
        tg={"upstream": {1: [160.5, 161.5], 4: [148.25, 149.75]}, "01": {1: [160, 162], 4: [210, 212]}}
    )
    assert api.submit(payload, ada).status_code == 201
    posted = Submission.objects.get()
    copied_payload = {**payload, "nonce": uuid.uuid4().hex}
    body = envelope.envelope_bytes(envelope.sign(copied_payload, envelope.SUBMISSION_TYPE, [ada]))
    rows = copyrows.submission_rows(
        copied_payload,
        body,
        copyrows.sha256_hex(envelope.canonical_bytes(copied_payload)),
        key=(posted.key_id, posted.contributor_id),
        lookups=copyrows.Lookups(campaign.pk, campaign.definition["sweep"]),
        received_at=copyrows.now(),
        refreshed=False,
    )
    with connection.cursor() as wrapper:
        copyrows.write(wrapper.cursor, [rows])

    copied = Submission.objects.exclude(pk=posted.pk).get()
    columns = _values(Submission, NAMING)
    assert Submission.objects.filter(pk=copied.pk).values(*columns).get() == (
        Submission.objects.filter(pk=posted.pk).values(*columns).get()
    )
    assert copied.payload_sha256 == copyrows.sha256_hex(envelope.canonical_bytes(copied_payload))
    assert bytes(RawEnvelope.objects.get(submission=copied).body) == body
    posted_rows, copied_rows = derived_rows(posted), derived_rows(copied)
    assert posted_rows == copied_rows
    assert [len(posted_rows[name]) for name in ("variants", "sweep_rows", "Measurement")] == [2, 8, 4]
