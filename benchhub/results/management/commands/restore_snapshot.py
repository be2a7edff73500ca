import time
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from benchhub.results import restore


class Command(BaseCommand):
    help = (
        "Build an empty service's state from a public snapshot file (GET /api/v1/snapshot/): campaign versions, "
        "contributors and keys, every submission from its signed envelope (checked again), withdrawals, hidden and "
        "released rows and the model claims that stood; then every cell is recomputed. All or nothing. What the "
        "snapshot does not carry is listed in docs/reliability.md."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("file", type=Path, help="a benchhub-snapshot-*.jsonl.gz file")

    def handle(self, *args: Any, **options: Any) -> None:
        path: Path = options["file"]
        if not path.is_file():
            raise CommandError(f"{path} is not a file.")
        started = time.perf_counter()
        try:
            found = restore.restore(path)
        except restore.RestoreError as error:
            raise CommandError(str(error)) from None
        self.stdout.write(
            f"restored {found.submissions} submission(s) of {found.contributors} contributor(s) ({found.keys} key(s)): "
            f"{found.withdrawn} withdrawn, {found.hidden} hidden, {found.released} released, {found.pinned} model "
            f"claim(s) pinned; {found.cells} cell(s) recomputed in {time.perf_counter() - started:.1f} s"
        )
