"""Thin Celery tasks taking ids. Each is idempotent (acks_late may run it twice) and each is also
reachable from a management command (refresh_cells, rebuild_cells)."""

from __future__ import annotations

from datetime import timedelta

from celery import shared_task
from django.conf import settings
from django.core.cache import cache
from django.db.models import Q
from django.utils import timezone

from benchhub.results import cells
from benchhub.results.models import Submission


@shared_task(name="benchhub.results.tasks.refresh_cells_for_submission")
def refresh_cells_for_submission(submission_id: str) -> int:
    return cells.refresh_submission_cells(submission_id)


@shared_task(name="benchhub.results.tasks.requeue_stale_submissions")
def requeue_stale_submissions() -> int:
    """Covers a crash between commit and enqueue, a lost message, or a broker outage."""
    cutoff = timezone.now() - timedelta(seconds=settings.BENCHHUB_SWEEPER_GRACE_SECONDS)
    stale = Submission.objects.filter(Q(cells_refreshed_at__isnull=True) & Q(received_at__lte=cutoff))
    queued = 0
    for pk in stale.values_list("id", flat=True)[:1000]:
        # During a backlog the same submission stays stale for a while: queue it once per grace period.
        if cache.add(f"benchhub:requeued:{pk}", 1, timeout=settings.BENCHHUB_SWEEPER_GRACE_SECONDS):
            refresh_cells_for_submission.delay(str(pk))
            queued += 1
    return queued
