from pathlib import Path
from typing import Any

from benchhub_protocol import campaign_versions
from django.core.management.base import BaseCommand, CommandError, CommandParser

from benchhub.results import signing


class Command(BaseCommand):
    help = (
        "Offline, on the moderator's machine: sign a campaign version file with the campaign key (--key FILE, never "
        "a setting), in place or into --out. Every variant must name a commit."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("version_file", type=Path)
        parser.add_argument("--key", type=Path, required=True, help="the campaign key's file (new_campaign_key)")
        parser.add_argument("--out", type=Path, help="where to write the signed version (default: in place)")

    def handle(self, *args: Any, version_file: Path, key: Path, out: Path | None, **options: Any) -> None:
        try:
            signed = signing.sign(signing.read_version(version_file), signing.load_key(key))
            signing.write_version(out or version_file, signed)
        except signing.SigningError as error:
            raise CommandError(str(error)) from None
        self.stdout.write(
            f"Signed {signed['slug']} version {signed['version']}: digest {campaign_versions.digest(signed)}."
        )
