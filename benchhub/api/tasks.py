"""The daily public snapshot, as a Celery beat task (the same as `manage.py write_snapshot`)."""

from __future__ import annotations

from celery import shared_task
from django.core.management import call_command


@shared_task(name="benchhub.api.tasks.write_snapshot")
def write_snapshot() -> None:
    call_command("write_snapshot")
