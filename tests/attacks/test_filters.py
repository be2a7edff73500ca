"""Issues 30 and 33, one rule: a filter value the service does not know answers 400 (naming the
field and the value, with the known ones or the nearest), on the pages and on the API, and never
adds a cache entry. 2,000 requests to /?quant=<random> used to add 2,000 Redis keys."""

from __future__ import annotations

import uuid

import pytest
from django.core.cache import cache

from benchhub.results import cells
from tests.attacks.conftest import Attacker
from tests.conftest import build_payload, persona

pytestmark = pytest.mark.django_db(transaction=True)


def _cache_keys() -> int:
    """Entries of the shared cache other than the throttles' counters (one per client and scope)."""
    client = cache._cache.get_client()  # type: ignore[attr-defined]
    return sum(1 for key in client.scan_iter(count=1000) if b"throttle-log:" not in key)


@pytest.fixture
def board(attacker: Attacker) -> Attacker:
    assert attacker.register(persona("ada"), "ada").status_code == 201
    assert attacker.submit(build_payload(), persona("ada")).status_code == 201
    cells.refresh_all_cells()
    return attacker


def test_random_quant_values_on_the_home_page_answer_400_and_add_no_cache_entry(board: Attacker) -> None:
    assert board.get("/", {"quant": "iq2_xxs"}).status_code == 200
    before = _cache_keys()
    statuses = {board.get("/", {"quant": uuid.uuid4().hex}).status_code for _ in range(200)}
    assert statuses == {400}
    assert _cache_keys() == before
    page = board.get("/", {"quant": "q9_nothing"}).text
    assert "Unknown quant" in page and "IQ2_XXS" in page


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("chip", "Apple M9"),
        ("chip", "apple m5 pro"),
        ("model", "f" * 64),
        ("variant", "07"),
        ("batch_size", "7"),
        ("quant", "Q9_Z"),
        ("gpu_cores", "99"),
    ],
)
def test_an_unknown_leaderboard_filter_value_answers_400_naming_it(board: Attacker, field: str, value: str) -> None:
    before = _cache_keys()
    response = board.get("/api/v1/leaderboard/", {"campaign": "mv-ext-iquants", field: value})
    body = response.json()
    assert (response.status_code, body["error"], body["field"], body["value"]) == (400, "unknown_value", field, value)
    assert body.get("known") or body.get("did_you_mean")
    assert _cache_keys() == before


def test_the_lowercase_chip_slug_still_selects_its_chip(board: Attacker) -> None:
    by_name = board.get("/api/v1/leaderboard/", {"campaign": "mv-ext-iquants", "chip": "Apple M5 Pro"}).json()
    by_slug = board.get("/api/v1/leaderboard/", {"campaign": "mv-ext-iquants", "chip": "apple-m5-pro"}).json()
    assert by_name["rows"] and by_slug == by_name
    near = board.get("/api/v1/measurements/", {"chip": "apple m5 pro"}).json()
    assert near["did_you_mean"][0] in ("Apple M5 Pro", "apple-m5-pro", "apple-m5-pro-20c")


@pytest.mark.parametrize("path", ["/api/v1/submissions/", "/api/v1/measurements/", "/api/v1/measurements.csv"])
def test_an_unknown_list_filter_value_answers_400_not_an_empty_200(board: Attacker, path: str) -> None:
    for field, value in (("chip", "Apple M9"), ("quant", "Q9_Z"), ("contributor", "nobody"), ("campaign", "nope")):
        response = board.get(path, {field: value})
        assert (response.status_code, response.json()["field"]) == (400, field), (path, field)
