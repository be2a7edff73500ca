"""Reliability tests (issue 7). Fast tests run with the rest of the suite; tests marked `slow`
(live processes, fault injection, sustained load) run only when asked for with `-m slow`."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.reliability.faults import OwnPostgres, OwnRedis, Stack


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "slow: fault and load tests of tests/reliability; run with `pytest -m slow`")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Deselect (never skip-as-pass) slow tests unless the -m expression names them."""
    if "slow" in (config.getoption("markexpr") or ""):
        return
    slow = [item for item in items if item.get_closest_marker("slow")]
    if slow:
        config.hook.pytest_deselected(items=slow)
        items[:] = [item for item in items if not item.get_closest_marker("slow")]


@pytest.fixture
def roomy_throttles(settings: Any) -> None:
    """Attack volumes far above the production rates; the throttles have their own tests."""
    settings.BENCHHUB_THROTTLE_ADDRESS = "1000000/hour"
    settings.BENCHHUB_THROTTLE_KEY = "1000000/hour"


@pytest.fixture
def own_redis(tmp_path: Path) -> Iterator[OwnRedis]:
    server = OwnRedis(tmp_path)
    server.start()
    try:
        yield server
    finally:
        if server.process is not None:
            server.kill()


@pytest.fixture
def fault_stack(campaign: Any, patches_dir: Path, tmp_path: Path, own_redis: OwnRedis) -> Iterator[Stack]:
    stack = Stack(tmp_path, patches_dir)
    stack.env["REDIS_URL"] = own_redis.url
    # A deliberately broken setting, to show a fault test can fail (docs/reliability.md):
    # BENCHHUB_FAULT_OVERRIDES="CELERY_TASK_ACKS_LATE=false,BENCHHUB_SWEEPER_INTERVAL_SECONDS=100000".
    for item in filter(None, os.environ.get("BENCHHUB_FAULT_OVERRIDES", "").split(",")):
        name, _, value = item.partition("=")
        stack.env[name.strip()] = value.strip()
    try:
        yield stack
    finally:
        stack.stop_all()


@pytest.fixture
def own_postgres() -> Iterator[OwnPostgres]:
    server = OwnPostgres()
    try:
        server.create()
        yield server
    finally:
        with contextlib.suppress(AssertionError):  # not running: stopped by the test, or never started
            server.stop("immediate")
        server.remove()
