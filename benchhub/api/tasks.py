"""The public snapshot, published by Celery beat every BENCHHUB_SNAPSHOT_INTERVAL_SECONDS (what
`manage.py write_snapshot` does), and queued by GET /api/v1/snapshot/ while there is none."""

from __future__ import annotations

import logging
from pathlib import Path

from celery import shared_task
from django.conf import settings

from benchhub.api import snapshot
from benchhub.api.manifest import site_manifest

log = logging.getLogger(__name__)


@shared_task(name="benchhub.api.tasks.write_snapshot")
def write_snapshot(only_if_missing: bool = False) -> None:
    """only_if_missing: what a request queues while none is published, so that however many requests
    queue it before the first one is written, one snapshot is written, not one each."""
    published = snapshot.publish(Path(settings.BENCHHUB_SNAPSHOT_DIR), site_manifest, only_if_missing=only_if_missing)
    if published is None:
        log.info("snapshot: another writer is publishing one, or one is published")
    else:
        log.info(
            "snapshot: %s, %d submissions, %d bytes",
            published["file"],
            published["submissions"],
            published["size_bytes"],
        )
