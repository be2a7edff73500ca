from typing import Any

from django.core.management.base import BaseCommand
from django.db import transaction
from django.utils import timezone

from benchhub.results import cells, storage
from benchhub.results.models import Submission


class Command(BaseCommand):
    help = (
        "Re-derive every submission's normalised rows from its stored raw envelope, then recompute every "
        "leaderboard cell. Safe to run at any time; moderation state (hidden) is kept."
    )

    def handle(self, *args: Any, **options: Any) -> None:
        count = 0
        for submission in Submission.objects.select_related("raw", "machine", "model_file").iterator(chunk_size=200):
            with transaction.atomic():
                submission.variants.all().delete()  # cascades to runs, rows, checks and measurements
                storage.store_rows(submission, storage.stored_payload(submission))
            count += 1
        refreshed = cells.refresh_all_cells()
        Submission.objects.update(cells_refreshed_at=timezone.now())
        self.stdout.write(f"Rebuilt {count} submission(s) and {refreshed} cell(s) from the raw envelopes.")
