import json
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from benchhub.results import signing


class Command(BaseCommand):
    help = (
        "Offline, on the moderator's machine: make a campaign signing key, its seed written to FILE (mode 600), and "
        "print the entry that campaigns/keys.json needs to trust it (a key comes to agents with a release)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("file", type=Path)
        parser.add_argument("--note", default="campaign key", help="what the keys.json entry says of it")

    def handle(self, *args: Any, file: Path, note: str, **options: Any) -> None:
        try:
            signer = signing.new_key(file)
        except (signing.SigningError, OSError) as error:
            raise CommandError(str(error)) from None
        self.stdout.write(json.dumps(signing.key_entry(signer, note), indent=2))
