"""Concurrency on the real PostgreSQL, and throttling per key and per client address."""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from benchhub_protocol import envelope
from django.core.cache import cache
from django.db import connection
from django.test import Client, RequestFactory
from rest_framework.request import Request

from benchhub.api.throttling import AddressThrottle
from benchhub.results.models import Submission
from tests.conftest import Api, build_payload, persona, signed_submission


@pytest.mark.django_db(transaction=True)
def test_it_stores_exactly_one_row_when_eight_threads_race_the_same_nonce(campaign: Any) -> None:
    cache.clear()
    ada = persona("ada")
    assert Api(Client()).register(ada, "ada").status_code == 201
    body = signed_submission(build_payload(), ada)
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
    statuses = [
        api.submit(
            build_payload(tg={"upstream": {4: [100 + n] * 2}, "01": {4: [150] * 2}}), ada, REMOTE_ADDR=f"203.0.113.{n}"
        ).status_code
        for n in range(3)
    ]
    assert statuses == [201, 201, 429]
    body = api.submit(build_payload(), ada, REMOTE_ADDR="203.0.113.99").json()
    assert body["error"] == "throttled" and body["retry_after"] > 0
    assert Submission.objects.count() == 2


LOCAL_COUNTERS = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}
COUNTERS = {"redis": None, "in-process": LOCAL_COUNTERS}


@pytest.fixture(params=sorted(COUNTERS))
def counters(request: Any, settings: Any) -> Iterator[str]:
    """The shared counters (the test Redis) and the ones a process keeps without it."""
    if COUNTERS[request.param] is not None:
        settings.CACHES = COUNTERS[request.param]
    cache.clear()
    yield request.param
    cache.clear()


def address_check(address: str) -> tuple[bool, float | None]:
    throttle = AddressThrottle()
    allowed = throttle.allow_request(Request(RequestFactory().post("/", REMOTE_ADDR=address)), None)  # type: ignore[arg-type]
    return allowed, throttle.wait()


def checks_at_once(address: str, racers: int) -> list[bool]:
    barrier = threading.Barrier(racers)
    answers: list[bool] = []

    def race() -> None:
        barrier.wait()
        answers.append(address_check(address)[0])

    threads = [threading.Thread(target=race) for _ in range(racers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return answers


def test_it_lets_exactly_the_limit_through_when_requests_race_one_address(counters: str, settings: Any) -> None:
    """Reading the counters and writing them back as two steps let 8 to 16 of these 16 through."""
    settings.BENCHHUB_THROTTLE_ADDRESS = "5/hour"
    switch_interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # threads of one process interleave inside the in-process counters too
    try:
        for trial in range(10):
            answers = checks_at_once(f"198.51.100.{trial}", 16)
            assert sorted(answers) == [False] * 11 + [True] * 5, f"{counters}, trial {trial}"
    finally:
        sys.setswitchinterval(switch_interval)


def test_the_allowance_comes_back_when_its_oldest_request_leaves_the_window(counters: str, settings: Any) -> None:
    settings.BENCHHUB_THROTTLE_ADDRESS = "2/second"
    assert address_check("192.0.2.50") == (True, None)
    time.sleep(0.5)
    assert address_check("192.0.2.50") == (True, None)
    allowed, wait = address_check("192.0.2.50")
    assert not allowed and wait is not None and 0 < wait <= 0.5, "until the oldest leaves, not a whole window"
    assert address_check("192.0.2.51")[0], "another address has its own window"
    time.sleep(wait + 0.05)
    assert address_check("192.0.2.50") == (True, None), "the oldest left; the refused check was not counted"
    assert address_check("192.0.2.50")[0] is False, "the second one is still in the window"


def test_counters_left_by_drfs_throttle_do_not_push_checks_onto_the_fallback(
    settings: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """An upgrade meets DRF's pickled histories, kept for up to a window under DRF's key names."""
    settings.BENCHHUB_THROTTLE_ADDRESS = "2/hour"
    cache.clear()
    cache.set("throttle_address_192.0.2.60", [time.time()] * 5, 3600)  # what SimpleRateThrottle stored
    with caplog.at_level("WARNING", logger="benchhub.api.throttling"):
        answers = [address_check("192.0.2.60")[0] for _ in range(3)]
    assert answers == [True, True, False]
    assert caplog.records == [], "the checks fell back to this process's counters"
    cache.clear()
