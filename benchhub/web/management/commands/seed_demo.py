"""`manage.py seed_demo`: the published reference rows plus demo submissions, registered and
ingested through the real signed path, so a fresh site shows what it will look like.

Exit codes: 0 seeded (running it again stores nothing new); 1 the campaign is missing (run
`migrate` first), the database holds an older release's demo submissions, or the ingest refused a
demo envelope (one sentence on stderr)."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from benchhub.accounts.errors import IngestError
from benchhub.accounts.models import Contributor
from benchhub.results.ingest import ingest_submission, register
from benchhub.results.models import Campaign
from benchhub.results.tasks import refresh_cells_for_submission
from benchhub.web import demo
from benchhub.web.reference import load_reference_rows

# The demo keys already sent these nonces or runs with other numbers: an older release's demo rows.
STALE_DEMO_CODES = ("nonce_reused", "duplicate_measurement")
STALE_DEMO = (
    "this database holds demo submissions from an older release (same demo keys and nonces, other "
    "numbers): start from an empty database (the embedded default's is db.sqlite3 in the checkout) and run it again."
)


class Command(BaseCommand):
    help = "Load the published reference rows and demo submissions (marked demo) through the real ingest path."

    def handle(self, *args: Any, **options: Any) -> None:
        references = load_reference_rows()
        campaign = Campaign.objects.filter(slug=demo.CAMPAIGN).first()
        if campaign is None:
            raise CommandError(f"campaign {demo.CAMPAIGN} does not exist: run `manage.py migrate` first.")
        try:
            for handle in demo.HANDLES:
                register(demo.signed_demo_registration(handle))
                # Only the contributor holding the demo key is marked, never a real one by name.
                Contributor.objects.filter(keys__keyid=demo.signer_for(handle).keyid).update(is_demo=True)
            created = 0
            for run in demo.demo_runs():
                result = ingest_submission(demo.signed_demo_run(campaign, run))
                created += result.created
                if result.created and not settings.CELERY_TASK_ALWAYS_EAGER:
                    # The ingest queued the refresh for a worker; run it here too, so the site is
                    # populated when the command returns even if no worker is running yet.
                    refresh_cells_for_submission(result.id)
        except IngestError as error:
            if error.code in STALE_DEMO_CODES:
                raise CommandError(STALE_DEMO) from error
            raise CommandError(f"the ingest refused a demo envelope: {error}") from error
        self.stdout.write(
            f"reference rows: {references.created} created, {references.updated} updated; "
            f"demo submissions: {created} created, {len(demo.demo_runs()) - created} already present"
        )
