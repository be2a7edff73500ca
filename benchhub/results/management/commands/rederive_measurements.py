from typing import Any

from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandParser
from django.db import transaction

from benchhub.results import storage
from benchhub.results.measurements import measurement_rows, stored_variants
from benchhub.results.models import Measurement, Submission

CHUNK = 500


class Command(BaseCommand):
    help = (
        "Re-derive every submission's measurements from its stored raw envelope, then recompute every "
        "leaderboard cell (rebuild_cells). Safe to run at any time and again after a crash; moderation state is "
        "kept. Works in chunks of submissions, one transaction each, so memory stays bounded whatever the table size."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--chunk", type=int, default=CHUNK, help=f"submissions per transaction (default {CHUNK})")

    def handle(self, *args: Any, chunk: int, **options: Any) -> None:
        done = 0
        last = None
        while True:
            page = Submission.objects.order_by("pk").select_related("raw").prefetch_related("variants")
            if last is not None:
                page = page.filter(pk__gt=last)
            submissions = list(page[:chunk])
            if not submissions:
                break
            with transaction.atomic():
                Measurement.objects.filter(submission__in=submissions).delete()
                Measurement.objects.bulk_create(
                    row
                    for submission in submissions
                    for row in measurement_rows(
                        submission, storage.stored_payload(bytes(submission.raw.body)), stored_variants(submission)
                    )
                )
            done += len(submissions)
            last = submissions[-1].pk
            self.stdout.write(f"{done} submission(s) re-derived", ending="\r")
        self.stdout.write(f"{done} submission(s) re-derived")
        call_command("rebuild_cells", stdout=self.stdout)
