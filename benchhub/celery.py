"""Celery application. Without REDIS_URL, tasks run in-process (settings set task_always_eager)."""

import os
from typing import Any

from celery import Celery
from celery.signals import task_postrun, task_prerun

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "benchhub.settings")

app = Celery("benchhub")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()

# Celery's Django fixup closes every database connection before and after every task, whatever
# CONN_MAX_AGE says (celery#4116; its fix was reverted in celery#9824), so each cell refresh paid
# for a new PostgreSQL backend: a fork, authentication, cold catalog caches, a new Django
# connection. With reuse this high the fixup closes them once every 2**31 tasks; instead a task
# gets what Django gives a request: close_old_connections before and after it, which honours
# CONN_MAX_AGE and CONN_HEALTH_CHECKS (a connection the server dropped is replaced, not used).
app.conf.CELERY_DB_REUSE_MAX = 2**31


@task_prerun.connect
@task_postrun.connect
def close_old_connections_around_tasks(sender: Any = None, **_: Any) -> None:
    if getattr(getattr(sender, "request", None), "is_eager", False):
        return  # in-process: inside the caller's request or transaction, whose connection it is
    from django.db import close_old_connections

    close_old_connections()
