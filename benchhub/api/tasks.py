"""The public snapshot, published by Celery beat every BENCHHUB_SNAPSHOT_INTERVAL_SECONDS (the same as
`manage.py write_snapshot`), and queued by GET /api/v1/snapshot/ while there is none."""

from __future__ import annotations

from celery import shared_task
from django.core.management import call_command


@shared_task(name="benchhub.api.tasks.write_snapshot")
def write_snapshot() -> None:
    call_command("write_snapshot")
