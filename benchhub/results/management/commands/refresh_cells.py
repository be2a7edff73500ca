from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from benchhub.results import cells
from benchhub.results.tasks import requeue_stale_submissions


class Command(BaseCommand):
    help = "Refresh the cells of the given submissions now, or with --stale queue every stale submission (the sweeper)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("submission_ids", nargs="*", help="submission UUIDs")
        parser.add_argument("--stale", action="store_true", help="run the sweeper once")

    def handle(self, *args: Any, submission_ids: list[str], stale: bool, **options: Any) -> None:
        for submission_id in submission_ids:
            self.stdout.write(f"{submission_id}: {cells.refresh_submission_cells(submission_id)} cell(s)")
        if stale:
            self.stdout.write(f"Queued {requeue_stale_submissions()} stale submission(s).")
