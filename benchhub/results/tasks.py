"""Thin Celery tasks taking plain values. Each is idempotent (acks_late may run it twice) and each
is also reachable from a management command (refresh_cells, rebuild_cells, rederive_measurements).

Refreshes are coalesced per cell group: a submission arriving while its group's refresh is queued,
or running but not yet holding the group's lock, adds nothing to the queue, and that refresh takes
every submission waiting for the group once it holds the lock. The queued-marker is dropped only
then, so however many workers there are and however many submissions arrive during one refresh,
they cost one more refresh, which waits for the lock; one that then finds nothing waiting (a
duplicate message) costs a query. The durable record of what still needs
a refresh is `Submission.cells_refreshed_at IS NULL`, which the sweeper re-queues whatever happened
to the marker or the message (a broker outage, a worker killed between taking and finishing it).
"""

from __future__ import annotations

import hashlib
import logging
from datetime import timedelta

from celery import shared_task
from django.conf import settings
from django.core.cache import cache
from django.db.models import F, Q
from django.utils import timezone

from benchhub.results import board, cells, claims
from benchhub.results.models import CellGroup, FileStanding, Submission

logger = logging.getLogger(__name__)


def _marker(group: board.Group) -> str:
    return "benchhub:refresh-queued:" + hashlib.sha256(group.lock_name().encode()).hexdigest()


def queue_refresh(group: board.Group, force: bool = False) -> bool:
    """Queue a refresh of the group unless one is already waiting; best effort (the sweeper covers
    a failure). `force`: refresh even with no submission waiting (its file's claims changed).
    Returns whether a message was sent."""
    marker = _marker(group) + (":force" if force else "")
    try:
        if not cache.add(marker, 1, timeout=settings.BENCHHUB_SWEEPER_GRACE_SECONDS):
            return False
    except Exception:  # the cache is down: queue without de-duplicating
        logger.warning("cache unreachable; queueing the refresh of %s without de-duplication", group)
    try:
        refresh_group_cells.delay(*group.task_args(), *((True,) if force else ()))
    except Exception:  # the broker's errors vary by transport; losing the enqueue is recoverable
        logger.exception("could not queue the refresh of %s", group)
        _release(marker)
        return False
    return True


def _release(marker: str) -> None:
    try:
        cache.delete(marker)
    except Exception:  # an unreachable cache expires the marker itself
        logger.warning("cache unreachable; the refresh marker %s expires on its own", marker)


def queue_file_groups(model_sha256: str) -> int:
    """Queue a forced refresh of each group of the file not refreshed since its claims' standing
    last changed (claims.settle): every page shows the claim that stands. Returns how many."""
    changed = FileStanding.objects.filter(sha256=model_sha256).values_list("updated_at", flat=True).first()
    groups = CellGroup.objects.filter(model_sha256=model_sha256)
    if changed is not None:
        groups = groups.filter(Q(refreshed_at__isnull=True) | Q(refreshed_at__lt=changed))
    return sum(queue_refresh(board.Group(*values), force=True) for values in groups.values_list(*board.GROUP_FIELDS))


def settle_claims(model_sha256: str, changed: bool = False) -> int:
    """Record the file's standing and queue the groups that have not seen it; returns how many."""
    if not changed and not claims.in_dispute(model_sha256):
        return 0
    claims.settle(model_sha256, changed=changed)
    return queue_file_groups(model_sha256)


@shared_task(name="benchhub.results.tasks.settle_file_claims")
def settle_file_claims(model_sha256: str) -> int:
    return settle_claims(model_sha256)


def after_claim(model_sha256: str) -> None:
    """Once an upload or a moderator's change has committed: a disputed file's standing is settled
    in the worker, outside that transaction, so no upload waits on another file's rows. Best effort:
    the sweeper settles every disputed file each minute."""
    if not claims.in_dispute(model_sha256):
        return
    try:
        settle_file_claims.delay(model_sha256)
    except Exception:  # the broker's errors vary by transport; the sweeper settles it
        logger.exception("could not queue the claims of %s", model_sha256)


@shared_task(name="benchhub.results.tasks.refresh_group_cells")
def refresh_group_cells(
    campaign_id: int,
    chip: str,
    gpu_cores: int | None,
    model_sha256: str,
    backend: str,
    campaign_version: int = 1,
    force: bool = False,
) -> int:
    group = board.Group(campaign_id, chip, gpu_cores, model_sha256, backend, campaign_version)
    if force:
        marker = _marker(group) + ":force"
        return cells.refresh_group(group, on_locked=lambda: _release(marker))
    marker = _marker(group)
    if not group.waiting_submissions().exists():
        # A duplicate or late message costs a query or two and no lock. The marker goes first, then
        # another look: a submission that committed before the release found the marker and queued nothing.
        _release(marker)
        if not group.waiting_submissions().exists():
            return 0
    # The marker stays while this waits for the lock: what arrives meanwhile is taken by this refresh.
    return cells.refresh_group(group, only_if_waiting=True, on_locked=lambda: _release(marker))


@shared_task(name="benchhub.results.tasks.refresh_cells_for_submission")
def refresh_cells_for_submission(submission_id: str) -> int:
    """One submission's group, refreshed now (management command, demo seeding)."""
    return cells.refresh_submission_cells(submission_id)


# How far back end_probation looks for keys that left probation: the sweeper runs every minute, so a
# week covers any outage it could have; older cases are what `rebuild_cells` is for.
PROBATION_LOOKBACK = timedelta(days=7)


def end_probation() -> int:
    """Submissions whose key left probation after their cells were last refreshed wait again, so
    the sweeper brings them in. Returns how many. Reads only the keys that left probation within
    PROBATION_LOOKBACK (a small set), then their submissions by key."""
    probation = timedelta(seconds=settings.BENCHHUB_KEY_PROBATION_S)
    if not probation:
        return 0
    ended = timezone.now() - probation
    return Submission.objects.filter(
        key__created_at__lte=ended,
        key__created_at__gt=ended - PROBATION_LOOKBACK,
        cells_refreshed_at__isnull=False,
        cells_refreshed_at__lt=F("key__created_at") + probation,
    ).update(cells_refreshed_at=None)


@shared_task(name="benchhub.results.tasks.requeue_stale_submissions")
def requeue_stale_submissions() -> int:
    """Covers a crash between commit and enqueue, a lost message, or a broker outage: queues the
    groups of submissions still waiting after the grace period. Returns how many were queued."""
    end_probation()
    for model_sha256 in claims.disputed_files():  # a key's probation ending can change a standing
        settle_claims(model_sha256)
    cutoff = timezone.now() - timedelta(seconds=settings.BENCHHUB_SWEEPER_GRACE_SECONDS)
    stale_groups = (
        Submission.objects.filter(cells_refreshed_at__isnull=True, received_at__lte=cutoff)
        .order_by()
        .values_list(*board.GROUP_FIELDS)
        .distinct()
    )
    return sum(queue_refresh(board.Group(*values)) for values in stale_groups[:1000])
