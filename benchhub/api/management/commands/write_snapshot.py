from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandParser
from django.utils import timezone

from benchhub.api import snapshot
from benchhub.api.manifest import manifest_for


class Command(BaseCommand):
    help = (
        "Write the public snapshot (every raw envelope, the campaigns, the keys and the moderation decisions) "
        "as gzipped JSON lines; Celery beat runs it daily. Patch URLs are made absolute with BENCHHUB_PUBLIC_URL."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--out", type=Path, help="file to write (default: BENCHHUB_SNAPSHOT_DIR/<date>.jsonl.gz)")

    def handle(self, *args: Any, out: Path | None, **options: Any) -> None:
        if out is None:
            out = Path(settings.BENCHHUB_SNAPSHOT_DIR) / f"benchhub-snapshot-{timezone.now():%Y-%m-%d}.jsonl.gz"
        out.parent.mkdir(parents=True, exist_ok=True)
        partial = out.with_name(out.name + ".partial")
        base = settings.BENCHHUB_PUBLIC_URL.rstrip("/")
        with partial.open("wb") as file:
            for piece in snapshot.gzipped(snapshot.records(lambda c: manifest_for(c, lambda p: base + p))):
                file.write(piece)
        partial.replace(out)
        self.stdout.write(str(out))
