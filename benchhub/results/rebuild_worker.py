"""Worker processes for `rebuild_cells` (the rows of ranges of submissions, then the cells of
groups). Apart from the modules whose functions they run because a spawned process imports this
module to find the function before Django is set up; setting up here, in the task rather than in a
pool initializer, makes a failure to start an error the command reports instead of a pool that
restarts its workers forever."""

from __future__ import annotations

import functools
import gc
import importlib
import multiprocessing
import os
from collections.abc import Sequence
from typing import Any


def total_in_processes(task: str, items: Sequence[Any], workers: int) -> int:
    """The sum of `task(item)` over `items` (task named "module.function", returning a count), in
    `workers` spawned processes working on this process's database, each taking one item at a time."""
    from django.db import connection

    database = {name: connection.settings_dict[name] for name in ("NAME", "USER", "PASSWORD", "HOST", "PORT")}
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "benchhub.settings")
    with multiprocessing.get_context("spawn").Pool(workers) as pool:
        return sum(pool.imap_unordered(functools.partial(run, database, task), items))


def run(database: dict[str, Any], task: str, item: Any) -> int:
    import django
    from django.apps import apps

    if not apps.ready:
        django.setup()
        from django.db import connection

        # The parent's database, whatever the settings say (a test run's database has another name).
        connection.settings_dict.update(database)
    module, _, function = task.rpartition(".")
    # A task holds ~10^5 objects at once (a chunk's parsed payloads and rows, or a group's values),
    # all freed by reference counting when it ends; the cycle collector, left on, would traverse
    # them again and again while they are being built: ~30% of a rows task's CPU.
    gc.disable()
    try:
        result: int = getattr(importlib.import_module(module), function)(item)
    finally:
        gc.enable()
    return result
