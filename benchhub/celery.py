"""Celery application. Without REDIS_URL, tasks run in-process (settings set task_always_eager)."""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "benchhub.settings")

app = Celery("benchhub")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
