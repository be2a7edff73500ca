"""Reliability tests (issue 7). Fast tests run with the rest of the suite; tests marked `slow`
(live processes, fault injection, sustained load) run only when asked for with `-m slow`."""

from __future__ import annotations

from typing import Any

import pytest


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
