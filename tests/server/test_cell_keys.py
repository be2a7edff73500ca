"""Cell numbers (cell_keys.py) and time-ordered submission ids (models.time_ordered_uuid)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import pytest
from benchhub_agent import envelope
from django.db import connection

from benchhub.results import cell_keys
from benchhub.results.models import CellKey, Measurement, Submission, time_ordered_uuid
from tests.conftest import Api, build_payload

pytestmark = pytest.mark.django_db


def test_a_name_keeps_its_number_and_nulls_name_one_cell(campaign: object) -> None:
    apple = (campaign.pk, "Apple M2 Max", 38, "Q4_K", "01", 4)  # type: ignore[attr-defined]
    nvidia = (campaign.pk, "NVIDIA H200", None, "Q4_K", "01", 4)  # type: ignore[attr-defined]
    with connection.cursor() as cursor:
        first = cell_keys.numbers(cursor, [apple, nvidia])
        again = cell_keys.numbers(cursor, [nvidia, apple, (*apple[:5], 8)])
    assert again[apple] == first[apple] and again[nvidia] == first[nvidia]
    assert len(set(again.values())) == 3
    assert CellKey.objects.count() == 3, "no second row for the name without a GPU core count"


def test_every_measurement_points_at_the_cell_it_names(api: Api, ada: envelope.Signer) -> None:
    for machine in ({}, {"chip": "NVIDIA H200", "gpu_cores": None}):
        assert api.submit(build_payload(machine=machine), ada).status_code == 201
    rows = Measurement.objects.values_list(*cell_keys.NAME_COLUMNS, "cell_key_id")
    keys = {
        key.pk: (key.campaign_id, key.chip, key.gpu_cores, key.quant, key.variant, key.batch_size)
        for key in CellKey.objects.all()
    }
    assert len(rows) == 8 and all(keys[row[-1]] == row[:-1] for row in rows)


def test_submission_ids_are_version_7_and_ordered_by_time() -> None:
    start = datetime(2026, 1, 1, tzinfo=UTC)
    ids = [time_ordered_uuid(start + timedelta(milliseconds=step)) for step in range(50)]
    assert all(value.version == 7 and value.variant == uuid.RFC_4122 for value in ids)
    assert ids == sorted(ids) and len(set(ids)) == 50
    assert int.from_bytes(ids[0].bytes[:6], "big") == int(start.timestamp() * 1000)
    assert time_ordered_uuid() > ids[-1]


def test_submissions_arriving_later_sort_later(api: Api, ada: envelope.Signer) -> None:
    for _ in range(3):
        assert api.submit(build_payload(), ada).status_code == 201
    by_arrival = list(Submission.objects.order_by("received_at").values_list("id", flat=True))
    assert by_arrival == sorted(by_arrival)
