import time
from typing import Any

from django.core.management.base import BaseCommand

from benchhub.results import cells


class Command(BaseCommand):
    help = (
        "Recompute every group's leaderboard cells and headlines from its stored measurements, one group at a "
        "time through the refresh's own code (cells.refresh_group, under the group's lock), and drop cells of no "
        "group. Safe to run at any time, beside the workers. rederive_measurements first derives the "
        "measurements again from the raw envelopes."
    )

    def handle(self, *args: Any, **options: Any) -> None:
        started = time.perf_counter()
        count = cells.refresh_all_cells()
        seconds = time.perf_counter() - started
        self.stdout.write(f"{count} cell(s) of {len(cells.all_groups())} group(s) recomputed in {seconds:.1f} s")
