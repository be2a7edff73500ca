"""Campaign versions in tests: the development campaign key (its seed is public, docs/campaigns.md)
and a new version published as a moderator would, signed offline with that key."""

from __future__ import annotations

import copy
import hashlib
from collections.abc import Callable
from typing import Any

from benchhub_protocol import campaign_versions, envelope

# The key the bundled versions are signed with: a development key, never a deployment's.
DEV_CAMPAIGN_KEY = envelope.Signer.from_seed(hashlib.sha256(b"benchhub-dev-campaign-key").digest())


def next_version(
    slug: str, change: Callable[[dict[str, Any]], None], signer: envelope.Signer = DEV_CAMPAIGN_KEY
) -> dict[str, Any]:
    """The campaign's newest version with `change` applied, numbered next and signed."""
    from benchhub.results.models import CampaignVersion

    newest = CampaignVersion.objects.filter(campaign__slug=slug).order_by("-version").first()
    assert newest is not None
    manifest = copy.deepcopy(newest.manifest)
    change(manifest)
    manifest["version"] = newest.version + 1
    return {**manifest, "signature": campaign_versions.sign(manifest, signer)}


def publish(slug: str, change: Callable[[dict[str, Any]], None]) -> Any:
    """A new signed version made the open one (versions.publish, as publish_campaign_version does)."""
    from benchhub.results import versions

    return versions.publish(next_version(slug, change))


def pin(commit: str, variant: str = "pr-29869") -> Callable[[dict[str, Any]], None]:
    def change(manifest: dict[str, Any]) -> None:
        for entry in manifest["variants"]:
            if entry["name"] == variant:
                entry["commit"] = commit

    return change
