"""Issue 7, items 5 and 8, the fast part: with the shared cache unreachable the throttles still
count (in this process) and nothing answers 500."""

from __future__ import annotations

from typing import Any

import pytest

from tests.conftest import Api, build_payload, persona

pytestmark = pytest.mark.django_db


def test_it_still_throttles_and_never_fails_when_the_shared_cache_is_unreachable(
    api: Api, campaign: Any, settings: Any
) -> None:
    settings.CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": "redis://127.0.0.1:1/0",  # nothing listens on port 1
        }
    }
    settings.BENCHHUB_THROTTLE_ADDRESS = "3/hour"
    stranger = persona("stranger")
    statuses = [api.submit(build_payload(), stranger, REMOTE_ADDR="198.51.100.77").status_code for _ in range(4)]
    assert statuses == [401, 401, 401, 429]
