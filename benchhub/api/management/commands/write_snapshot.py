from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandParser
from django.utils import timezone

from benchhub.api import snapshot, tasks
from benchhub.api.manifest import site_manifest


class Command(BaseCommand):
    help = (
        "Publish the public snapshot (every raw envelope, the campaigns, the keys and the moderation decisions, "
        "gzipped JSON lines) into BENCHHUB_SNAPSHOT_DIR with its index, as Celery beat does every "
        "BENCHHUB_SNAPSHOT_INTERVAL_SECONDS; --out writes it to one file instead."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--out", type=Path, help="write the snapshot to this file only (no index)")
        parser.add_argument(
            "--queue",
            action="store_true",
            help="queue the snapshot task instead of writing here (the embedded default runs it in-process); "
            "prints how many submissions the published snapshot holds, or 'queued'",
        )
        parser.add_argument("--if-missing", action="store_true", help="with --queue: only when none is published")

    def handle(self, *args: Any, out: Path | None, queue: bool, if_missing: bool, **options: Any) -> None:
        if queue:
            directory = Path(settings.BENCHHUB_SNAPSHOT_DIR)
            if not if_missing or snapshot.latest(directory) is None:
                tasks.write_snapshot.delay()
            published = snapshot.latest(directory)
            self.stdout.write(f"{published['submissions']} submissions" if published else "queued")
            return
        if out is not None:
            with out.open("wb") as file:
                index = snapshot.write_file(file, site_manifest, timezone.now())
            self.stdout.write(f"{out}: {index['submissions']} submissions, {index['size_bytes']} bytes")
            return
        published = snapshot.publish(Path(settings.BENCHHUB_SNAPSHOT_DIR), site_manifest)
        if published is None:
            self.stdout.write("another writer is publishing a snapshot; nothing written")
            return
        self.stdout.write(
            f"{settings.BENCHHUB_SNAPSHOT_DIR}/{published['file']}: {published['submissions']} submissions, "
            f"{published['size_bytes']} bytes, sha256 {published['sha256']}"
        )
