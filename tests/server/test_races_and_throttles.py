"""Concurrency on the real PostgreSQL, and throttling per key and per client address."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest
from benchhub_agent import envelope
from django.core.cache import cache
from django.db import connection
from django.test import Client

from benchhub.results.models import Submission
from tests.conftest import Api, build_payload, persona, submission_envelope


@pytest.mark.django_db(transaction=True)
def test_it_stores_exactly_one_row_when_eight_threads_race_the_same_nonce(campaign: Any) -> None:
    cache.clear()
    ada = persona("ada")
    assert Api(Client()).register(ada, "ada").status_code == 201
    body = submission_envelope(build_payload(), ada)
    barrier = threading.Barrier(8)
    answers: list[tuple[int, str]] = []

    def send() -> None:
        try:
            barrier.wait()
            response = Api(Client()).post(Api.submissions, body)
            answers.append((response.status_code, response.json()["id"]))
        finally:
            connection.close()

    threads = [threading.Thread(target=send) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert Submission.objects.count() == 1
    assert sorted(status for status, _ in answers) == [200] * 7 + [201]
    assert {submission_id for _, submission_id in answers} == {str(Submission.objects.get().id)}


@pytest.fixture
def tight_throttles(settings: Any) -> Iterator[None]:
    settings.BENCHHUB_THROTTLE_ADDRESS = "3/hour"
    settings.BENCHHUB_THROTTLE_KEY = "2/hour"
    cache.clear()
    yield
    cache.clear()


@pytest.mark.django_db
def test_it_throttles_per_client_address_and_ignores_a_forged_forwarded_for(
    api: Api, campaign: Any, tight_throttles: None
) -> None:
    stranger = persona("stranger")
    statuses = [api.submit(build_payload(), stranger, HTTP_X_FORWARDED_FOR=f"10.0.0.{n}").status_code for n in range(4)]
    assert statuses == [401, 401, 401, 429]
    response = api.submit(build_payload(), stranger, REMOTE_ADDR="192.0.2.7")
    assert response.status_code == 401, "another real address has its own allowance"


@pytest.mark.django_db
def test_it_reads_the_address_the_trusted_proxy_appended(
    api: Api, campaign: Any, tight_throttles: None, settings: Any
) -> None:
    settings.BENCHHUB_TRUSTED_PROXY_COUNT = 1
    stranger = persona("stranger")
    forged_prefixes = ["1.1.1.1", "2.2.2.2", "3.3.3.3", "4.4.4.4"]
    statuses = [
        api.submit(build_payload(), stranger, HTTP_X_FORWARDED_FOR=f"{forged}, 198.51.100.9").status_code
        for forged in forged_prefixes
    ]
    assert statuses == [401, 401, 401, 429]
    other = api.submit(build_payload(), stranger, HTTP_X_FORWARDED_FOR="198.51.100.10")
    assert other.status_code == 401


@pytest.mark.django_db
def test_it_throttles_per_key_across_addresses(api: Api, ada: envelope.Signer, tight_throttles: None) -> None:
    cache.clear()  # the registration of ada counted against this address
    statuses = [api.submit(build_payload(), ada, REMOTE_ADDR=f"203.0.113.{n}").status_code for n in range(3)]
    assert statuses == [201, 201, 429]
    body = api.submit(build_payload(), ada, REMOTE_ADDR="203.0.113.99").json()
    assert body["error"] == "throttled" and body["retry_after"] > 0
    assert Submission.objects.count() == 2
