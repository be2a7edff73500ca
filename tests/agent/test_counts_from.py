"""The agent's success line says from when a result of a key on probation counts: the server's
answer is untrusted, so only a real time is shown."""

from __future__ import annotations

from typing import Any

import pytest
from benchhub_agent.cli import _counts_from


def test_it_shows_the_time_a_new_keys_result_enters_the_leaderboard() -> None:
    assert _counts_from({"counts_from": "2026-12-05T09:30:00Z"}) == "2026-12-05 09:30 UTC"


@pytest.mark.parametrize(
    "answer",
    [{}, {"counts_from": None}, {"counts_from": "tomorrow"}, {"counts_from": 5}, {"counts_from": "\x1b[2J" * 20}],
)
def test_it_shows_nothing_for_an_answer_that_is_not_a_time(answer: dict[str, Any]) -> None:
    assert _counts_from(answer) is None
