"""Reads that render a whole board of leaderboard cells (the leaderboard API, the home and chip
pages) keep what they rendered in the shared cache under the cells' version: an unchanged board
costs one small aggregate query instead of thousands of rows rendered, and a changed cell changes
the version, so it is never served stale."""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable
from datetime import datetime
from typing import TypeVar, cast

from django.core.cache import cache
from django.db.models import Count, Max, QuerySet, Sum

from benchhub.results.models import LeaderboardCell

RENDERED_TIMEOUT_S = 600

Rendered = TypeVar("Rendered")
CellsVersion = tuple[int, int, datetime | None]

logger = logging.getLogger(__name__)


def cells_version(cells: QuerySet[LeaderboardCell]) -> CellsVersion:
    """(count, sum of ids, newest updated_at) of the cells a read renders.

    cells.refresh_group writes a group's cells as new rows, with new, larger ids: the sum moves with
    every committed refresh, whatever order concurrent refreshes commit in. The newest updated_at
    alone misses a refresh that began first and committed last (its timestamps are older than cells
    already read); it covers a cell updated in place. Read the version before the cells: what is
    then cached under it is never older than it."""
    found = cells.order_by().aggregate(count=Count("id"), ids=Sum("id"), newest=Max("updated_at"))
    return (found["count"], found["ids"] or 0, found["newest"])


def cached_render(namespace: str, inputs: object, render: Callable[[], Rendered]) -> Rendered:
    """What render() returns, from the shared cache when the same inputs (a value with a stable
    repr that holds the cells' version and everything else the render reads) were rendered before.
    The cache only saves work: while it cannot be reached, render() runs in the request as it would
    without a cache (its socket timeouts bound the wait to about a second)."""
    key = f"{namespace}:" + hashlib.sha256(repr(inputs).encode()).hexdigest()
    try:
        found = cache.get(key)
    except Exception as error:  # the backend's connection errors vary (redis, socket, timeout)
        logger.warning("%s rendered without the shared cache: %r", namespace, error)
        return render()
    if found is not None:
        return cast(Rendered, found)
    rendered = render()
    try:
        cache.set(key, rendered, timeout=RENDERED_TIMEOUT_S)
    except Exception as error:
        logger.warning("%s not kept in the shared cache: %r", namespace, error)
    return rendered
