"""Issue 46, point 4: the first rows an upload creates (its chip's name, its machine, its model claim,
its cell group) created by concurrent uploads without a single failed statement, which PostgreSQL
would log as an ERROR: every statement each thread sends is watched, and none may raise."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest
from django.db import connection, transaction

from benchhub.accounts import names
from benchhub.accounts.models import ChipName
from benchhub.results import board, cells, storage
from benchhub.results.models import CellGroup, Machine, ModelFile
from tests.conftest import build_payload

pytestmark = pytest.mark.django_db(transaction=True)

THREADS = 8


def _race(work: Callable[[], None]) -> list[BaseException]:
    """Run `work` in THREADS threads released at once, each in a transaction on its own connection;
    returns every exception a statement raised (caught or not)."""
    start = threading.Barrier(THREADS)
    failed: list[BaseException] = []

    def watch(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        try:
            return execute(sql, params, many, context)
        except Exception as error:
            failed.append(error)
            raise

    def thread() -> None:
        try:
            with connection.execute_wrapper(watch), transaction.atomic():
                start.wait()
                work()
        except Exception as error:
            failed.append(error)
        finally:
            connection.close()

    threads = [threading.Thread(target=thread) for _ in range(THREADS)]
    for each in threads:
        each.start()
    for each in threads:
        each.join()
    return failed


def test_a_new_chip_machine_model_and_group_created_at_once_fail_no_statement(campaign: Any) -> None:
    payload = build_payload(machine={"chip": "Apple M9 Ultra"}, model={"sha256": "9" * 64})

    def first_rows() -> None:
        names.claim_chip(payload["machine"]["chip"])
        machine = storage.machine_row(payload["machine"])
        model = storage.model_file_row(payload["model"])
        cells.ensure_group(board.Group(campaign.pk, machine.chip, machine.gpu_cores, model.sha256, machine.backend))

    assert _race(first_rows) == []
    assert ChipName.objects.filter(name="Apple M9 Ultra").count() == 1
    assert (Machine.objects.count(), ModelFile.objects.filter(sha256="9" * 64).count(), CellGroup.objects.count()) == (
        1,
        1,
        1,
    )


def test_a_spelling_that_lost_the_race_is_still_refused(campaign: Any) -> None:
    spellings = iter(["Apple M9 Max", "APPLE M9 MAX"] * THREADS)
    lock = threading.Lock()
    refused: list[str] = []

    def claim() -> None:
        with lock:
            name = next(spellings)
        try:
            names.claim_chip(name)
        except names.IngestError as error:
            refused.append(error.code)

    assert _race(claim) == []
    assert len(refused) == THREADS // 2 and set(refused) == {"chip_name_taken"}
