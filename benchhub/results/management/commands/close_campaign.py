from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from benchhub.results import versions


class Command(BaseCommand):
    help = (
        "Close a campaign: its newest signed version becomes closed and the service takes no more results for it "
        "(400 campaign_closed); its cells and versions stay. Publishing a new version opens it again."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("slug")

    def handle(self, *args: Any, slug: str, **options: Any) -> None:
        try:
            closed = versions.close(slug)
        except versions.CampaignRefused as refused:
            raise CommandError(str(refused)) from None
        self.stdout.write(f"Closed {slug} at version {closed.version}.")
