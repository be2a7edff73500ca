"""Reads that render a whole board of leaderboard cells (the leaderboard API, the home and chip
pages) keep what they rendered in the shared cache with the cells' version: an unchanged board
costs one small aggregate query instead of thousands of rows rendered.

While submissions keep arriving, every cell refresh changes the version, and rendering on every
change would cost a full render on nearly every read exactly when the site is busy. So a board
whose cells changed is served as last rendered while that rendering is younger than
BENCHHUB_BOARD_MAX_STALENESS_SECONDS, and rendered again (once, by whichever request takes the
renewal lease, the others serving the last rendering meanwhile) after that: at most one render
per bound per board, and a board at most the bound (plus one render) behind its cells. At 0 a
changed cell is never served stale."""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Generic, NamedTuple, TypeVar, cast

from django.conf import settings
from django.core.cache import cache
from django.db import connection
from django.db.models import Count, Max, QuerySet, Sum

from benchhub.results.models import LeaderboardCell

RENDERED_TIMEOUT_S = 600
# How long a request that took the renewal of a stale board may take before another one may: a render
# that died (its worker killed) delays the board by at most this.
RENEWAL_LEASE_S = 30

Rendered = TypeVar("Rendered")


def code_version() -> str:
    """A digest of the code and templates that render boards, the same in every process of one
    release: a rendering kept in the shared cache by the previous release is never served by the
    next one (the cells' version alone would keep it until they change)."""
    root = Path(settings.BASE_DIR)
    digest = hashlib.sha256()
    for path in sorted([*(root / "benchhub").rglob("*.py"), *(root / "templates").rglob("*.html")]):
        digest.update(path.relative_to(root).as_posix().encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


CODE_VERSION = code_version()
CellsVersion = tuple[int, int, datetime | None]

logger = logging.getLogger(__name__)


class Kept(NamedTuple, Generic[Rendered]):
    """A rendering as the cache keeps it: the cells' version it was rendered from, and when that
    version was read (wall clock, shared by every process that reads the cache)."""

    version: CellsVersion
    read_at: float
    rendered: Rendered


def now() -> float:
    return time.time()


def cells_version(cells: QuerySet[LeaderboardCell]) -> CellsVersion:
    """(count, sum of ids, newest updated_at) of the cells a read renders. A refresh replaces its
    group's cells, and new rows take larger ids than any deleted, so every committed refresh moves
    the sum of ids, whatever order concurrent refreshes commit in."""
    found = cells.order_by().aggregate(count=Count("id"), ids=Sum("id"), newest=Max("updated_at"))
    return (found["count"], found["ids"] or 0, found["newest"])


def cached_render(
    namespace: str, inputs: object, cells: QuerySet[LeaderboardCell], render: Callable[[], Rendered]
) -> Rendered:
    """What render() returns for these inputs (a value with a stable repr holding everything the
    render reads besides the cells) and these cells: from the shared cache when it was rendered from
    the cells' current version, or, when they changed since, less than the staleness bound ago.

    The key is the inputs without the version, so a board has one entry, replaced as its cells
    change; it names the database too, since databases sharing one Redis (the bench's states) share
    inputs. The clock is read before the version: a rendering kept since read_at holds every cell
    committed before it. The cache only saves work: while it cannot be reached, render() runs in the
    request as it would without a cache (its socket timeouts bound the wait to about a second)."""
    key = (
        f"{namespace}:{CODE_VERSION}:{connection.settings_dict['NAME']}:"
        + hashlib.sha256(repr(inputs).encode()).hexdigest()
    )
    bound = settings.BENCHHUB_BOARD_MAX_STALENESS_SECONDS
    read_at = now()
    version = cells_version(cells)
    try:
        kept = cast("Kept[Rendered] | None", cache.get(key))
        if kept is not None and (kept.version == version or (bound > 0 and read_at - kept.read_at < bound)):
            return kept.rendered
        # Stale past the bound: one request renders it again; the others serve it as it is meanwhile.
        if kept is not None and bound > 0 and not cache.add(f"{key}:renewing:{kept.read_at!r}", 1, RENEWAL_LEASE_S):
            return kept.rendered
    except Exception as error:  # the backend's connection errors vary (redis, socket, timeout)
        logger.warning("%s rendered without the shared cache: %r", namespace, error)
        return render()
    rendered = render()
    try:
        cache.set(key, Kept(version, read_at, rendered), timeout=RENDERED_TIMEOUT_S)
    except Exception as error:
        logger.warning("%s not kept in the shared cache: %r", namespace, error)
    return rendered
