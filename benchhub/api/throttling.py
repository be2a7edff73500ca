"""Throttles per client address and per signing key (PROTOCOL.md section 4).

The client address is REMOTE_ADDR unless BENCHHUB_TRUSTED_PROXY_COUNT proxies stand in front of
the service; then it is the address the outermost trusted proxy appended to X-Forwarded-For,
counted from the right, so entries a client forges on the left are never read. Counters live in
Django's cache (Redis when REDIS_URL is set), shared by every worker process; while it cannot be
reached they live in each process's memory.
"""

from __future__ import annotations

import logging
from typing import Any

from django.conf import settings
from django.core.cache import cache as shared_cache
from django.core.cache.backends.locmem import LocMemCache
from django.http import HttpRequest
from rest_framework.request import Request
from rest_framework.throttling import SimpleRateThrottle
from rest_framework.views import APIView


def client_address(request: HttpRequest) -> str:
    remote = str(request.META.get("REMOTE_ADDR", ""))
    proxies: int = settings.BENCHHUB_TRUSTED_PROXY_COUNT
    if proxies <= 0:
        return remote
    hops = [hop.strip() for hop in str(request.META.get("HTTP_X_FORWARDED_FOR", "")).split(",") if hop.strip()]
    if len(hops) < proxies:
        # Fewer hops than proxies: the request skipped a proxy; trust only the connection.
        return remote
    return hops[-proxies]


logger = logging.getLogger(__name__)


class OutageTolerantCache:
    """The shared cache, or this process's own while the shared one cannot be reached.

    Ingest must not depend on Redis (it is only the broker and the counters): during an outage the
    limits still hold, per process instead of across all of them, and nothing answers 500.
    """

    def __init__(self) -> None:
        self.local = LocMemCache("benchhub-throttle-fallback", {})

    def _call(self, method: str, *args: Any) -> Any:
        try:
            return getattr(shared_cache, method)(*args)
        except Exception as error:  # the backend's connection errors vary (redis, socket, timeout)
            logger.warning("throttle counters fall back to this process: shared cache failed (%r)", error)
            return getattr(self.local, method)(*args)

    def get(self, key: str, default: Any = None) -> Any:
        return self._call("get", key, default)

    def set(self, key: str, value: Any, timeout: float | None = None) -> None:
        self._call("set", key, value, timeout)


class AddressThrottle(SimpleRateThrottle):
    scope = "address"
    cache = OutageTolerantCache()  # type: ignore[assignment]

    def get_rate(self) -> str:
        return str(settings.BENCHHUB_THROTTLE_ADDRESS)

    def get_cache_key(self, request: Request, view: APIView) -> str:
        return self.cache_format % {"scope": self.scope, "ident": client_address(request._request)}


class KeyThrottle(SimpleRateThrottle):
    """Checked by the ingest view once the signature has verified, so a forger cannot spend a
    victim key's allowance."""

    scope = "key"
    cache = AddressThrottle.cache  # type: ignore[assignment]

    def get_rate(self) -> str:
        return str(settings.BENCHHUB_THROTTLE_KEY)

    def get_cache_key(self, request: Request, view: APIView) -> str | None:
        keyid = getattr(request, "benchhub_keyid", None)
        return self.cache_format % {"scope": self.scope, "ident": keyid} if keyid else None
