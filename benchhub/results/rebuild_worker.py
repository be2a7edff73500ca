"""What each worker process of `rebuild_cells` runs. Apart from results/bulk.py because a spawned
process imports this module to find the function before Django is set up; setting up here, in the
task rather than in a pool initializer, makes a failure to start an error the command reports
instead of a pool that restarts its workers forever."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from benchhub.results.bulk import KeyRange


def rebuild_range(database: dict[str, Any], key_range: KeyRange) -> int:
    import django
    from django.apps import apps

    if not apps.ready:
        django.setup()
        from django.db import connection

        # The parent's database, whatever the settings say (a test run's database has another name).
        connection.settings_dict.update(database)
    from benchhub.results import bulk

    return bulk.rebuild_range(key_range)
