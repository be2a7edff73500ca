from typing import Any

from django.core.management.base import BaseCommand

from benchhub.results.campaigns import sync_campaigns
from benchhub.results.models import Campaign


class Command(BaseCommand):
    help = "Create or update the campaign rows from the campaign definitions shipped with the agent."

    def handle(self, *args: Any, **options: Any) -> None:
        count = sync_campaigns(Campaign)
        self.stdout.write(f"Synced {count} campaign(s).")
