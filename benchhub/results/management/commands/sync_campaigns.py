from typing import Any

from django.core.management.base import BaseCommand, CommandError

from benchhub.results.campaigns import sync_campaigns
from benchhub.results.models import Campaign
from benchhub.results.versions import CampaignRefused


class Command(BaseCommand):
    help = (
        "Create the campaign versions bundled with the agent (benchhub_protocol/campaigns/<slug>/v<N>.json). A version "
        "that a submission references never changes: a changed file under it is refused, with how to make a new one."
    )

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            count = sync_campaigns(Campaign)
        except CampaignRefused as refused:
            raise CommandError(str(refused)) from None
        self.stdout.write(f"Synced {count} campaign(s).")
