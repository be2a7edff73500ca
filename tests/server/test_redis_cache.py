"""The service's Redis cache backend: Django's, keeping one redis-py client per pool."""

from __future__ import annotations

import threading

from django.core.cache import cache, caches

from benchhub.redis_cache import RedisCache


def test_the_service_caches_in_redis_through_one_client_per_pool() -> None:
    backend = caches["default"]
    assert isinstance(backend, RedisCache), "the test settings use REDIS_URL"
    first = backend._cache.get_client(write=True)  # type: ignore[attr-defined]
    assert backend._cache.get_client(write=True) is first  # type: ignore[attr-defined]
    assert backend._cache.get_client() is first, "one server: reads and writes share its pool"  # type: ignore[attr-defined]


def test_threads_sharing_the_client_each_read_their_own_values() -> None:
    client = caches["default"]._cache.get_client(write=True)  # type: ignore[attr-defined]
    cache.delete_many([f"shared-client-{n}" for n in range(8)])
    wrong: list[int] = []

    def round_trips(n: int) -> None:
        for step in range(200):
            client.set(f"shared-client-{n}", f"{n}:{step}")
            if client.get(f"shared-client-{n}") != f"{n}:{step}".encode():
                wrong.append(n)

    threads = [threading.Thread(target=round_trips, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert wrong == []
    assert cache.add("shared-client-add", 1, 5) and not cache.add("shared-client-add", 2, 5)
    assert cache.get("shared-client-add") == 1
    cache.delete_many([f"shared-client-{n}" for n in range(8)] + ["shared-client-add"])
