"""`manage.py prepare_site [--demo]`: what a site needs before it serves, run by both `make run` and
the production stack (docker-compose.yml's web service), so a reader sees the same things on both:
the database migrated, the campaigns synced from their definitions, the published reference rows
loaded, the agent wheel built when it is missing or older than agent/, and a snapshot published
when there is none. `--demo` (make run only) adds the demo submissions and publishes the snapshot
anew. Every step is idempotent: a restart changes nothing that is in place.

Exit codes: 0 ready; 1 a step failed (one sentence on stderr: the reference file, the wheel build
or a demo envelope), with the steps before it kept."""

from __future__ import annotations

import subprocess
from io import StringIO
from typing import Any

from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError, CommandParser

from benchhub.results.campaigns import sync_campaigns
from benchhub.results.models import Campaign
from benchhub.results.versions import CampaignRefused
from benchhub.web import wheel
from benchhub.web.reference import ReferenceFileError, load_reference_rows


class Command(BaseCommand):
    help = (
        "Migrate, sync the campaigns, load the published reference rows and build the agent wheel if it is "
        "stale: what make run and the compose stack run before serving."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--demo", action="store_true", help="also load the demo submissions (seed_demo)")

    def handle(self, *args: Any, **options: Any) -> None:
        verbosity = int(options["verbosity"])
        # migrate lists every migration it applies: shown only when asked for (-v 2).
        call_command("migrate", interactive=False, verbosity=max(verbosity - 1, 0), stdout=self.stdout)
        try:
            campaigns = sync_campaigns(Campaign)
            references = load_reference_rows()
        except (ReferenceFileError, CampaignRefused) as error:
            raise CommandError(str(error)) from error
        if wheel.is_current():
            built = "up to date"
        else:
            try:
                built = f"built {wheel.build().name}"
            except (subprocess.CalledProcessError, OSError) as error:
                raise CommandError(f"could not build the agent wheel into {wheel.wheel_dir()}: {error}") from error
        demo = ""
        if options["demo"]:
            out = StringIO()
            call_command("seed_demo", stdout=out)
            demo = f"; {out.getvalue().strip().split('; ')[-1]}"
        # The snapshot, when there is none or the demo just changed what it holds: written here by the
        # embedded default (tasks in-process), queued for the worker in production.
        out = StringIO()
        call_command("write_snapshot", queue=True, if_missing=not options["demo"], stdout=out)
        written = out.getvalue().strip()
        if verbosity:
            self.stdout.write(
                f"campaigns: {campaigns} synced; reference rows: {references.created} created, "
                f"{references.updated} updated; agent wheel: {built}{demo}; snapshot: {written}"
            )
