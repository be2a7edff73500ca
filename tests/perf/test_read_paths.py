"""The fast read paths answer exactly what the slow ones did: the cached leaderboard follows every
refreshed cell (at once with the staleness bound at 0, within the bound otherwise) and is still
answered while the cache is unreachable, and the CSV built from plain values matches the JSON list
row for row. (The pages' cached boards: tests/web/test_cached_pages.py.)"""

from __future__ import annotations

import csv
import io
from typing import Any

import pytest
from benchhub_agent import envelope
from django.test import Client

from benchhub.results import cells
from tests.conftest import Api, build_payload
from tests.web.test_cached_pages import stale_within

pytestmark = pytest.mark.django_db


def _submit(api: Api, signer: envelope.Signer, tg_01_bs4: float) -> str:
    tg = {"upstream": {1: [160.5, 161.5], 4: [148.25, 149.5]}, "01": {1: [160.5, 161.5], 4: [tg_01_bs4, tg_01_bs4]}}
    response = api.submit(build_payload(tg=tg), signer)
    assert response.status_code == 201
    submission_id: str = response.json()["id"]
    cells.refresh_submission_cells(submission_id)
    return submission_id


def _speedup(client: Client) -> Any:
    rows = client.get("/api/v1/leaderboard/", {"campaign": "mv-ext-iquants", "variant": "01", "batch_size": 4}).json()
    return [(row["speedup"], row["n_submissions"]) for row in rows["rows"]]


def test_it_never_serves_a_cached_leaderboard_after_a_cell_changed_with_the_bound_at_0(
    client: Client, api: Api, ada: envelope.Signer, settings: Any
) -> None:
    settings.BENCHHUB_BOARD_MAX_STALENESS_SECONDS = 0
    _submit(api, ada, 209.75)
    first = _speedup(client)
    assert _speedup(client) == first  # served again, from the cache
    _submit(api, ada, 300.25)
    second = _speedup(client)
    assert second != first
    assert second[0][1] == 2


def test_it_serves_a_changed_leaderboard_as_rendered_within_the_bound_and_renders_it_again_past_it(
    client: Client, api: Api, ada: envelope.Signer, settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = stale_within(5, settings, monkeypatch)
    _submit(api, ada, 209.75)
    first = _speedup(client)
    _submit(api, ada, 300.25)
    clock.now += 4.9
    assert _speedup(client) == first
    clock.now += 0.1
    second = _speedup(client)
    assert second != first
    assert second[0][1] == 2


@pytest.mark.parametrize("bound", [0, 5])
def test_it_answers_the_leaderboard_while_the_cache_is_unreachable(
    client: Client, api: Api, ada: envelope.Signer, settings: Any, monkeypatch: pytest.MonkeyPatch, bound: float
) -> None:
    stale_within(bound, settings, monkeypatch)
    _submit(api, ada, 209.75)
    served = client.get("/api/v1/leaderboard/", {"campaign": "mv-ext-iquants"})
    settings.CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": "redis://127.0.0.1:1/0",  # nothing listens on port 1
            "OPTIONS": {"socket_connect_timeout": 1.0, "socket_timeout": 1.0},
        }
    }
    unreachable = client.get("/api/v1/leaderboard/", {"campaign": "mv-ext-iquants"})
    assert unreachable.status_code == served.status_code == 200
    assert unreachable.content == served.content


def test_it_exports_the_same_values_as_the_json_list(client: Client, api: Api, ada: envelope.Signer) -> None:
    _submit(api, ada, 209.75)
    listed = client.get("/api/v1/measurements/", {"page_size": 500}).json()["results"]
    exported = list(
        csv.DictReader(io.StringIO(b"".join(client.get("/api/v1/measurements.csv").streaming_content).decode()))
    )
    assert len(exported) == len(listed) == 4
    by_key = {(row["variant"], row["batch_size"]): row for row in exported}
    for row in listed:
        written = by_key[(row["variant"], str(row["batch_size"]))]
        assert written == {name: "" if value is None else str(value) for name, value in row.items()}


def test_it_lists_measurements_exactly_as_the_serializer_wrote_them(
    client: Client, api: Api, ada: envelope.Signer
) -> None:
    from benchhub.api.serializers import MeasurementSerializer
    from benchhub.results.models import Measurement

    _submit(api, ada, 209.75)
    listed = client.get("/api/v1/measurements/", {"page_size": 500}).json()["results"]
    expected = [MeasurementSerializer(item).data for item in Measurement.objects.order_by("-id")]
    assert listed == expected
