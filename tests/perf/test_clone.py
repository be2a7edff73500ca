"""bench clone's SQL on the real PostgreSQL: a copy's submission ids stay version 7 UUIDs in time
order, shifted back with the copy's times, and differ between copies."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection

from bench.clone import new_uuid
from benchhub.results.models import time_ordered_uuid

pytestmark = pytest.mark.django_db


def copied(original: uuid.UUID, copy: int, shift: timedelta) -> uuid.UUID:
    expression = new_uuid("original", copy, int(shift.total_seconds() * 1000))
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {expression} FROM (SELECT %s::uuid AS original) AS row", [str(original)])
        return uuid.UUID(str(cursor.fetchone()[0]))


def milliseconds(value: uuid.UUID) -> int:
    return value.int >> 80


def test_a_copys_ids_are_version_7_shifted_back_and_new_for_each_copy() -> None:
    at = datetime(2026, 12, 4, 12, 0, tzinfo=UTC)
    original, later = time_ordered_uuid(at), time_ordered_uuid(at + timedelta(seconds=1))
    shift = timedelta(hours=2)
    first, second = copied(original, 1, shift), copied(original, 2, shift * 2)
    assert {first.version, second.version} == {7} and first.variant == uuid.RFC_4122
    assert milliseconds(first) == milliseconds(original) - 2 * 3600 * 1000
    assert milliseconds(second) == milliseconds(original) - 4 * 3600 * 1000
    assert len({original, first, second, copied(original, 1, shift * 2)}) == 4
    assert copied(original, 1, shift) == first  # the same row maps to the same id in every table
    assert first < copied(later, 1, shift)  # time order kept within a copy
