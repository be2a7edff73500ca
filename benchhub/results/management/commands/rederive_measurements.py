from typing import Any

from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandParser
from django.db import transaction

from benchhub.results import board, cells, flags, storage, versions
from benchhub.results.measurements import measurement_rows, stored_variants
from benchhub.results.models import Measurement, Submission

CHUNK = 500


class Command(BaseCommand):
    help = (
        "Re-derive every submission's flags and measurements from its stored raw envelope, judged by the campaign "
        "version it ran under, then recompute every leaderboard cell (rebuild_cells). Safe to run at any time and "
        "again after a crash; moderation state is kept. Works in chunks of submissions, one transaction each, so "
        "memory stays bounded whatever the table size."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--chunk", type=int, default=CHUNK, help=f"submissions per transaction (default {CHUNK})")

    def handle(self, *args: Any, chunk: int, **options: Any) -> None:
        done = 0
        last = None
        while True:
            page = (
                Submission.objects.order_by("pk")
                .select_related("raw", "campaign", "ran_under")
                .prefetch_related("variants")
            )
            if last is not None:
                page = page.filter(pk__gt=last)
            submissions = list(page[:chunk])
            if not submissions:
                break
            with transaction.atomic():
                Measurement.objects.filter(submission__in=submissions).delete()
                rows: list[Measurement] = []
                groups: set[board.Group] = set()
                for submission in submissions:
                    payload = storage.stored_payload(bytes(submission.raw.body))
                    judged = flags.derive(payload, versions.judged_by(submission))
                    measured_from = submission.ran_under.measured_from if submission.ran_under else 1
                    if (judged, measured_from) != (submission.flags, submission.campaign_version):
                        status = Submission.Status.FLAGGED if judged else Submission.Status.ACCEPTED
                        Submission.objects.filter(pk=submission.pk).update(
                            flags=judged, status=status, campaign_version=measured_from
                        )
                        submission.flags, submission.status, submission.campaign_version = judged, status, measured_from
                    groups.add(board.Group.of(submission))
                    rows += measurement_rows(submission, payload, stored_variants(submission))
                Measurement.objects.bulk_create(rows)
                for group in groups:
                    cells.ensure_group(group)
            done += len(submissions)
            last = submissions[-1].pk
            self.stdout.write(f"{done} submission(s) re-derived", ending="\r")
        self.stdout.write(f"{done} submission(s) re-derived")
        call_command("rebuild_cells", stdout=self.stdout)
