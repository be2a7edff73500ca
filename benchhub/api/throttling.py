"""Throttles per client address and per signing key (docs/protocol.md section 4), per client address
on the costly reads: list pages, the leaderboard and the CSV export (issue 25), and on registration
per network (IPv4 /24, IPv6 /64 and /48) and for everyone together (issue 30: keys cost a network).

The client address is REMOTE_ADDR unless BENCHHUB_TRUSTED_PROXY_COUNT proxies stand in front of
the service; then it is the address the outermost trusted proxy appended to X-Forwarded-For,
counted from the right, so entries a client forges on the left are never read. Counters live in
Django's cache (Redis when REDIS_URL is set), shared by every worker process, and each check is one
atomic step there; while it cannot be reached they live in each process's memory.
"""

from __future__ import annotations

import ipaddress
import logging
import threading
import time
import uuid
from typing import Any

from django.conf import settings
from django.core.cache import caches
from django.core.cache.backends.locmem import LocMemCache
from django.core.cache.backends.redis import RedisCache
from django.http import HttpRequest
from redis.exceptions import RedisError
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


def network_of(address: str, ipv6_prefix: int = 64) -> str:
    """The client's network: its IPv4 /24 or its IPv6 /64 (or another prefix), as CIDR text; an
    IPv4-mapped IPv6 address is its IPv4 address. The address itself where it does not parse."""
    try:
        parsed = ipaddress.ip_address(address.split("%")[0])
    except ValueError:
        return address
    if isinstance(parsed, ipaddress.IPv6Address) and parsed.ipv4_mapped is not None:
        parsed = parsed.ipv4_mapped
    prefix = 24 if parsed.version == 4 else ipv6_prefix
    return str(ipaddress.ip_network(f"{parsed}/{prefix}", strict=False))


logger = logging.getLogger(__name__)

# The sliding log of one counter, in one step on the Redis server, so that concurrent requests
# (every web worker shares the counters) cannot both read "one left" and both pass: drop the
# entries that left the window, then count this request if the window has room, else answer how
# long until its oldest entry leaves. The server's clock, one clock for every web host.
SLIDING_LOG = """
local now_parts = redis.call('TIME')
local now = tonumber(now_parts[1]) + tonumber(now_parts[2]) / 1000000
local window, limit = tonumber(ARGV[1]), tonumber(ARGV[2])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - window)
if redis.call('ZCARD', KEYS[1]) < limit then
  redis.call('ZADD', KEYS[1], now, ARGV[3])
  redis.call('PEXPIRE', KEYS[1], math.ceil(window * 1000))
  return ''
end
local oldest = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
if oldest[2] == nil then
  return tostring(window)
end
return tostring(tonumber(oldest[2]) + window - now)
"""


class LocalCounters:
    """The same sliding logs in this process's memory: where no Redis is configured, and while the
    shared one cannot be reached (the limits then hold per process instead of across all of them)."""

    def __init__(self) -> None:
        self.logs = LocMemCache("benchhub-throttle-fallback", {})  # bounded: it culls old keys
        self.lock = threading.Lock()

    def hit(self, key: str, limit: int, window: int) -> float | None:
        now = time.time()
        with self.lock:
            log = [moment for moment in self.logs.get(key, []) if moment > now - window]
            if len(log) < limit:
                self.logs.set(key, [*log, now], window)
                return None
            self.logs.set(key, log, window)
            return min(log) + window - now if log else float(window)


class SharedCounters:
    """The counters in Django's cache: one atomic script call a check where it is Redis.

    Ingest must not depend on Redis (it is only the broker and the counters): during an outage the
    checks fall back to this process's counters, and nothing answers 500.
    """

    def __init__(self) -> None:
        self.local = LocalCounters()
        self.script: Any = None

    def hit(self, key: str, limit: int, window: int) -> float | None:
        """None: counted and let through; else the seconds until the window has room again."""
        backend = caches["default"]
        if not isinstance(backend, RedisCache):
            return self.local.hit(key, limit, window)
        try:
            # Django has no public accessor for its redis-py client; this is the one it uses itself.
            client = backend._cache.get_client(write=True)  # type: ignore[attr-defined]
            if self.script is None:
                self.script = client.register_script(SLIDING_LOG)
            answer = self.script(keys=[backend.make_key(key)], args=[window, limit, uuid.uuid4().hex], client=client)
        except (RedisError, OSError) as error:  # redis-py wraps socket errors; a refused script too
            logger.warning("throttle counters fall back to this process: shared cache failed (%r)", error)
            return self.local.hit(key, limit, window)
        return float(answer) if answer else None


class SlidingLogThrottle(SimpleRateThrottle):
    """DRF's rate strings, keys and answers (a request is refused while `rate` requests were let
    through in the last period; refusals are not counted), with the counting done by `counters`."""

    counters = SharedCounters()
    seconds_to_wait: float | None = None
    # Not DRF's "throttle_%(scope)s_%(ident)s": under those names the cache holds DRF's pickled
    # lists (of the version before, for up to a window), which a sorted-set command refuses.
    cache_format = "throttle-log:%(scope)s:%(ident)s"

    def allow_request(self, request: Request, view: APIView) -> bool:
        limit, window = self.parse_rate(self.rate)
        key = self.get_cache_key(request, view)
        if limit is None or window is None or key is None:
            return True
        self.seconds_to_wait = self.counters.hit(key, limit, window)
        return self.seconds_to_wait is None

    def wait(self) -> float | None:
        return self.seconds_to_wait


class AddressThrottle(SlidingLogThrottle):
    scope = "address"

    def get_rate(self) -> str:
        return str(settings.BENCHHUB_THROTTLE_ADDRESS)

    def get_cache_key(self, request: Request, view: APIView) -> str:
        return self.cache_format % {"scope": self.scope, "ident": client_address(request._request)}


class KeyThrottle(SlidingLogThrottle):
    """Checked by the ingest view once the signature has verified, so a forger cannot spend a
    victim key's allowance."""

    scope = "key"

    def get_rate(self) -> str:
        return str(settings.BENCHHUB_THROTTLE_KEY)

    def get_cache_key(self, request: Request, view: APIView) -> str | None:
        keyid = getattr(request, "benchhub_keyid", None)
        return self.cache_format % {"scope": self.scope, "ident": keyid} if keyid else None


class ReadThrottle(AddressThrottle):
    """List pages scan many rows, and every new filter set of the leaderboard renders and caches a
    board of its own: varied filters would fill the cache and the CPU."""

    scope = "read"

    def get_rate(self) -> str:
        return str(settings.BENCHHUB_THROTTLE_READ)


class ExportThrottle(AddressThrottle):
    """The CSV export and the snapshot stream every matching row: up to millions a request."""

    scope = "export"

    def get_rate(self) -> str:
        return str(settings.BENCHHUB_THROTTLE_EXPORT)


class NetworkThrottle(SlidingLogThrottle):
    """Registrations per network: a /24 or a /64 holds many addresses, one attacker's for the asking."""

    scope = "network"
    ipv6_prefix = 64

    def get_rate(self) -> str:
        return str(settings.BENCHHUB_THROTTLE_NETWORK)

    def get_cache_key(self, request: Request, view: APIView) -> str | None:
        network = network_of(client_address(request._request), self.ipv6_prefix)
        if self.ipv6_prefix != 64 and ":" not in network:
            return None  # the wide scope is IPv6's alone
        return self.cache_format % {"scope": f"{self.scope}{self.ipv6_prefix}", "ident": network}


class WideNetworkThrottle(NetworkThrottle):
    """An IPv6 /48 is what one site is given: 65,536 /64s."""

    ipv6_prefix = 48


class RegistrationsThrottle(SlidingLogThrottle):
    """Every registration together: the ceiling on keys an hour, whatever networks they come from."""

    scope = "registrations"

    def get_rate(self) -> str:
        return str(settings.BENCHHUB_THROTTLE_REGISTRATIONS)

    def get_cache_key(self, request: Request, view: APIView) -> str:
        return self.cache_format % {"scope": self.scope, "ident": "all"}


REGISTRATION_THROTTLES = (AddressThrottle, NetworkThrottle, WideNetworkThrottle, RegistrationsThrottle)


def check_in_order(request: Request, view: APIView, throttles: list[SlidingLogThrottle]) -> None:
    """The first refusal ends the check, so a request refused for its network spends nothing of
    the global ceiling (DRF's own loop counts it in every throttle that lets it through)."""
    for throttle in throttles:
        if not throttle.allow_request(request, view):
            view.throttled(request, throttle.wait() or 1.0)
