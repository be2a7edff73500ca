"""`manage.py load_reference_rows [PATH]`: load the published reference tables.

Exit codes: 0 loaded; 1 the file is missing or malformed (one sentence on stderr, nothing written)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from benchhub.web.reference import DEFAULT_PATH, ReferenceFileError, load_reference_rows


class Command(BaseCommand):
    help = "Load published reference rows (shown as 'published, not signed', never in crowd medians)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("path", nargs="?", type=Path, default=DEFAULT_PATH, help="reference tables JSON file")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            result = load_reference_rows(options["path"])
        except ReferenceFileError as error:
            raise CommandError(str(error)) from error
        self.stdout.write(f"reference rows: {result.created} created, {result.updated} updated")
