"""Issue 25: GETs were never throttled. The API's list pages and leaderboard (each new filter set
renders and caches a board) and the CSV export are throttled per client address, in the shared
counters, with the JSON refusal and Retry-After of the write throttles."""

from __future__ import annotations

from typing import Any

import pytest
from benchhub_protocol import envelope
from django.test import Client

from tests.conftest import Api, publish_snapshot

pytestmark = pytest.mark.django_db

READS = ("/api/v1/submissions/", "/api/v1/measurements/", "/api/v1/leaderboard/?campaign=mv-ext-iquants")


@pytest.fixture
def tight(settings: Any) -> None:
    settings.BENCHHUB_THROTTLE_READ = "3/minute"
    settings.BENCHHUB_THROTTLE_EXPORT = "2/hour"


def _get(url: str, address: str = "203.0.113.7", **headers: Any) -> Any:
    return Client().get(url, REMOTE_ADDR=address, **headers)


@pytest.mark.parametrize("url", READS)
def test_it_throttles_a_heavy_read_per_address(api: Api, ada: envelope.Signer, tight: None, url: str) -> None:
    assert [_get(url).status_code for _ in range(3)] == [200, 200, 200]
    refused = _get(url)
    assert refused.status_code == 429
    assert refused.json()["error"] == "throttled" and int(refused["Retry-After"]) > 0
    assert _get(url, HTTP_X_FORWARDED_FOR="198.51.100.1").status_code == 429  # not a new address
    assert _get(url, address="192.0.2.1").status_code == 200


def test_leaderboard_filters_share_one_allowance(api: Api, ada: envelope.Signer, tight: None) -> None:
    statuses = [_get(f"{READS[2]}&batch_size={size}").status_code for size in (1, 2, 3, 4, 5)]
    assert statuses == [200, 200, 200, 429, 429]


@pytest.mark.parametrize("url", ["/api/v1/measurements.csv", "/api/v1/snapshot/"])
def test_it_throttles_the_exports_on_their_own_allowance(api: Api, ada: envelope.Signer, tight: None, url: str) -> None:
    publish_snapshot()
    assert [_get(url).status_code for _ in range(2)] == [200, 200]
    refused = _get(url)
    assert refused.status_code == 429 and refused.json()["error"] == "throttled"
    assert _get(READS[1]).status_code == 200  # the export's refusals leave the reads alone


def test_the_campaign_manifest_agents_read_stays_unthrottled(api: Api, ada: envelope.Signer, tight: None) -> None:
    assert {_get("/api/v1/campaigns/mv-ext-iquants/").status_code for _ in range(6)} == {200}
