"""Four Celery workers (real threads, the real Redis broker) refresh one group while submissions keep
arriving through the API and while, now and then, a long refresh holds the group's lock: at the
end every submission is marked refreshed, the stored cells equal a from-scratch recompute, and the
refreshes that did work are far fewer than the arrivals (tasks.py coalesces them)."""

from __future__ import annotations

import os
import random
import threading
import time
from typing import Any

import pytest
from benchhub_protocol import envelope
from celery.contrib.testing.worker import start_worker
from celery.signals import task_failure, task_postrun
from django.db import connection, transaction
from django.test import Client

from benchhub.celery import app
from benchhub.results import board, cells
from benchhub.results.models import Headline, LeaderboardCell, Submission
from tests.conftest import Api, build_payload, persona

pytestmark = pytest.mark.django_db(transaction=True)

PRODUCERS = 3
PER_PRODUCER = 25
HOLD_S = 0.5  # a refresh of a very large group, holding the lock


@pytest.fixture(autouse=True)
def _real_redis() -> None:
    if not os.environ.get("REDIS_URL"):
        pytest.fail("this test runs real Celery workers: set REDIS_URL (make test does).")


def stored(model: Any, group: board.Group) -> list[dict[str, Any]]:
    skip = {"id", "updated_at"}
    rows = model.objects.filter(**group.filter()).order_by(
        "variant", "commit", *(["batch_size"] * (model is LeaderboardCell))
    )
    return [
        {f.attname: getattr(row, f.attname) for f in model._meta.concrete_fields if f.attname not in skip}
        for row in rows
    ]


def computed(found: list[Any]) -> list[dict[str, Any]]:
    skip = {"id", "updated_at"}
    return [
        {f.attname: getattr(row, f.attname) for f in type(row)._meta.concrete_fields if f.attname not in skip}
        for row in found
    ]


def test_four_workers_and_a_stream_of_submissions_end_on_the_recomputed_cells(campaign: Any, settings: Any) -> None:
    settings.BENCHHUB_THROTTLE_KEY = settings.BENCHHUB_THROTTLE_ADDRESS = "100000/hour"
    settings.BENCHHUB_KEY_PROBATION_S = 0
    owner = persona("ada")
    assert Api(Client()).register(owner, "ada").status_code == 201
    signers = [owner, *(Api(Client()).another_machine(owner, "ada", n) for n in range(1, PRODUCERS))]
    app.control.purge()  # messages other tests left on this Redis db

    worked: list[int] = []
    failures: list[Any] = []

    def count(sender: Any = None, retval: Any = None, **_: Any) -> None:
        if sender is not None and sender.name == "benchhub.results.tasks.refresh_group_cells" and retval:
            worked.append(retval)
        connection.close()  # the worker thread's connection, which would outlive the test database

    def failed(**details: Any) -> None:
        failures.append(details.get("exception"))

    task_postrun.connect(count, weak=False)
    task_failure.connect(failed, weak=False)
    arrivals: list[str] = []
    holds: list[float] = []
    producing = threading.Event()
    producing.set()

    def produce(signer: envelope.Signer, seed: int) -> None:
        rng = random.Random(seed)
        try:
            for _ in range(PER_PRODUCER):
                ratio = rng.choice([1.1, 1.2, 1.3]) * rng.uniform(0.98, 1.02)
                tg = {
                    "upstream": {2: [100.0, 100.0], 4: [90.0, 90.0]},
                    "01": {2: [100 * ratio] * 2, 4: [90 * ratio] * 2},
                }
                response = Api(Client()).submit(build_payload(tg=tg), signer)
                assert response.status_code == 201, response.json()
                arrivals.append(response.json()["id"])
        finally:
            connection.close()

    def hold_the_lock(group: board.Group) -> None:
        try:
            while producing.is_set():
                with transaction.atomic():
                    cells._lock(group)
                    time.sleep(HOLD_S)
                holds.append(HOLD_S)
                time.sleep(0.05)
        finally:
            connection.close()

    try:
        with start_worker(app, pool="threads", concurrency=4, perform_ping_check=False, shutdown_timeout=30):
            first = Api(Client()).submit(build_payload(), owner)
            assert first.status_code == 201
            arrivals.append(first.json()["id"])
            group = board.Group.of(Submission.objects.get(pk=first.json()["id"]))
            holder = threading.Thread(target=hold_the_lock, args=(group,))
            producers = [threading.Thread(target=produce, args=(signer, n)) for n, signer in enumerate(signers)]
            holder.start()
            for thread in producers:
                thread.start()
            for thread in producers:
                thread.join()
            producing.clear()
            holder.join()
            deadline = time.monotonic() + 60
            while Submission.objects.filter(cells_refreshed_at__isnull=True).exists() and time.monotonic() < deadline:
                time.sleep(0.2)
            time.sleep(1.0)  # a last duplicate message, if any, is counted too
    finally:
        task_postrun.disconnect(count)
        task_failure.disconnect(failed)

    assert not failures
    assert len(arrivals) == PRODUCERS * PER_PRODUCER + 1
    assert not Submission.objects.filter(cells_refreshed_at__isnull=True).exists(), "a submission was left waiting"
    with transaction.atomic():
        expected_cells, expected_headlines = cells.compute_cells(group, held=False)
    assert stored(LeaderboardCell, group) == computed(expected_cells)
    assert stored(Headline, group) == computed(expected_headlines)
    assert LeaderboardCell.objects.filter(**group.filter(), n_submissions=len(arrivals)).exists()
    # Coalesced: what arrives while a refresh runs or waits for the lock costs one more refresh, not
    # one per worker (four workers that each took a message before the lock would do up to 4 a hold).
    assert 1 <= len(worked) <= min(2 * len(holds) + 1, len(arrivals) // 4), (len(worked), len(holds), len(arrivals))
