from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from benchhub.results import board, cells, signing, versions
from benchhub.results.models import CellGroup


class Command(BaseCommand):
    help = (
        "On the service: publish a signed campaign version file (sign_campaign_version) as the campaign's open "
        "version. Its signature must verify under a trusted campaign key and it must be the next number; older "
        "versions become superseded, and their cells too where it changes what is measured; every group of the "
        "campaign is refreshed."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("version_file", type=Path)

    def handle(self, *args: Any, version_file: Path, **options: Any) -> None:
        try:
            published = versions.publish(signing.read_version(version_file))
        except (signing.SigningError, versions.CampaignRefused) as error:
            raise CommandError(str(error)) from None
        groups = CellGroup.objects.filter(campaign_id=published.campaign_id).values_list(*board.GROUP_FIELDS)
        # Every group of the campaign is judged again now: the open version's rules may have changed.
        refreshed = sum(1 for values in groups if cells.refresh_group(board.Group(*values)) >= 0)
        changed = "; ".join(published.changes) or "nothing but its number"
        self.stdout.write(
            f"Published {published.campaign.slug} version {published.version} ({published.state}), digest "
            f"{published.digest}; changed: {changed}; {refreshed} group(s) refreshed."
        )
