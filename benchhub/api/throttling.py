"""Throttles per client address and per signing key (PROTOCOL.md section 4).

The client address is REMOTE_ADDR unless BENCHHUB_TRUSTED_PROXY_COUNT proxies stand in front of
the service; then it is the address the outermost trusted proxy appended to X-Forwarded-For,
counted from the right, so entries a client forges on the left are never read. Counters live in
Django's cache (Redis when REDIS_URL is set), shared by every worker process.
"""

from __future__ import annotations

from django.conf import settings
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


class AddressThrottle(SimpleRateThrottle):
    scope = "address"

    def get_rate(self) -> str:
        return str(settings.BENCHHUB_THROTTLE_ADDRESS)

    def get_cache_key(self, request: Request, view: APIView) -> str:
        return self.cache_format % {"scope": self.scope, "ident": client_address(request._request)}


class KeyThrottle(SimpleRateThrottle):
    """Checked by the ingest view once the signature has verified, so a forger cannot spend a
    victim key's allowance."""

    scope = "key"

    def get_rate(self) -> str:
        return str(settings.BENCHHUB_THROTTLE_KEY)

    def get_cache_key(self, request: Request, view: APIView) -> str | None:
        keyid = getattr(request, "benchhub_keyid", None)
        return self.cache_format % {"scope": self.scope, "ident": keyid} if keyid else None
