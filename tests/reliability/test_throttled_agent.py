"""Issue 7, item 8, the agent's side: a throttled agent waits as the server's Retry-After says and
then succeeds, against a live server with a per-key limit of one submission a second."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from benchhub_agent import keys, outbox
from benchhub_agent.dirs import home
from django.core.cache import cache

from benchhub.api.throttling import KeyThrottle
from benchhub.results.models import Submission
from tests.conftest import build_payload, signed_submission

pytestmark = pytest.mark.django_db(transaction=True)


def test_it_lets_a_throttled_agent_wait_and_then_succeed(
    live_server: Any, campaign: Any, settings: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings.BENCHHUB_THROTTLE_KEY = "1/second"
    cache.clear()  # the address counters of earlier runs live in the same Redis
    monkeypatch.setenv("BENCHHUB_HOME", str(tmp_path / "agent"))
    dirs = home()
    signer = keys.load_or_create(dirs)
    keys.register(dirs, live_server.url, "ada", signer)
    # The agent's retries happen inside urllib3, out of the agent's sight: the server side counts them.
    answers: list[bool] = []
    allow = KeyThrottle.allow_request

    def recording_allow(throttle: KeyThrottle, *args: Any) -> bool:
        answers.append(allow(throttle, *args))
        return answers[-1]

    monkeypatch.setattr(KeyThrottle, "allow_request", recording_allow)
    queued = []
    for _ in range(3):
        payload = build_payload()
        queued.append(outbox.put(dirs, payload["nonce"], signed_submission(payload, signer)))
    for path in queued:
        assert outbox.send(path, live_server.url, dirs)["status"] == "accepted"
    assert False in answers, "the limit never bit: the test proved nothing"
    assert answers.count(True) == 3
    assert outbox.pending(dirs) == []
    assert Submission.objects.count() == 3
