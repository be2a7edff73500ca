from typing import Any

from django.core.management.base import BaseCommand
from django.db import transaction
from django.utils import timezone

from benchhub.results import cells, storage
from benchhub.results.models import (
    CorrectnessCheck,
    GenerationCheck,
    Measurement,
    RawEnvelope,
    Submission,
    SubmissionVariant,
    SweepRow,
    SweepRun,
)

CHUNK = 500


class Command(BaseCommand):
    help = (
        "Re-derive every submission's normalised rows from its stored raw envelope, then recompute every "
        "leaderboard cell. Safe to run at any time; moderation state (hidden) is kept. Works in chunks of "
        f"{CHUNK} submissions (one transaction each), so memory stays bounded whatever the table size."
    )

    def handle(self, *args: Any, **options: Any) -> None:
        count = 0
        after = None
        while True:
            chunk = Submission.objects.select_related("machine", "model_file").order_by("pk")
            if after is not None:
                chunk = chunk.filter(pk__gt=after)
            submissions = list(chunk[:CHUNK])
            if not submissions:
                break
            self._rebuild(submissions)
            count += len(submissions)
            after = submissions[-1].pk
        refreshed = cells.refresh_all_cells()
        Submission.objects.update(cells_refreshed_at=timezone.now())
        self.stdout.write(f"Rebuilt {count} submission(s) and {refreshed} cell(s) from the raw envelopes.")

    @transaction.atomic
    def _rebuild(self, submissions: list[Submission]) -> None:
        ids = [submission.pk for submission in submissions]
        bodies = dict(RawEnvelope.objects.filter(submission_id__in=ids).values_list("submission_id", "body"))
        # Leaves first: without dependants each is one DELETE (Django's fast delete); deleting the
        # variants first would make the ORM load every dependent row to cascade it.
        SweepRow.objects.filter(run__submission_id__in=ids).delete()
        for model in (Measurement, CorrectnessCheck, GenerationCheck, SweepRun, SubmissionVariant):
            model.objects.filter(submission_id__in=ids).delete()
        storage.store_many(
            [(submission, storage.stored_payload(bytes(bodies[submission.pk]))) for submission in submissions]
        )
