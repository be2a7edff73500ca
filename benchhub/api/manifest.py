"""The campaign manifest of docs/protocol.md section 6: a version's signed manifest as it was signed,
plus what the service adds per deployment and the signature does not cover (each patch's URL, each
variant's availability) and the version's digest, state and signature."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.urls import reverse
from rest_framework.request import Request

from benchhub.results import campaigns, versions
from benchhub.results.models import Campaign, CampaignVersion


def manifest(campaign: Campaign, request: Request) -> dict[str, Any]:
    return manifest_for(campaign, lambda path: str(request.build_absolute_uri(path)))


def site_manifest(campaign: Campaign) -> dict[str, Any]:
    """The manifest with URLs made absolute by the site's own (BENCHHUB_PUBLIC_URL), where no request is."""
    base = settings.BENCHHUB_PUBLIC_URL.rstrip("/")
    return manifest_for(campaign, lambda path: base + path)


def shown_version(campaign: Campaign) -> CampaignVersion:
    """The open (or closed) version; a campaign with none yet shows its newest draft."""
    found = versions.current(campaign.pk)
    return found or CampaignVersion.objects.filter(campaign=campaign).order_by("-version").first() or _missing(campaign)


def _missing(campaign: Campaign) -> CampaignVersion:
    raise CampaignVersion.DoesNotExist(f"campaign {campaign.slug} has no version")


def manifest_for(
    campaign: Campaign, absolute: Callable[[str], str], version: CampaignVersion | None = None
) -> dict[str, Any]:
    """`absolute` makes a site path an absolute URL."""
    version = version or shown_version(campaign)

    def patch_url(name: str) -> str:
        return absolute(reverse("campaign-patch", args=[campaign.slug, name]))

    resolved = {variant.name: variant for variant in campaigns.resolved_variants(version.manifest)}
    variants = []
    for entry in version.manifest["variants"]:
        variant = resolved[entry["name"]]
        urls = {patch.name: patch_url(patch.name) if patch.sha256 else None for patch in variant.patches}
        variants.append(
            {
                **entry,
                "available": variant.available,
                "unavailable_reason": variant.unavailable_reason,
                "patches": [{**patch, "url": urls[patch["name"]]} for patch in entry.get("patches", [])],
            }
        )
    return {
        **version.manifest,
        "variants": variants,
        "digest": version.digest,
        "state": version.state,
        "signature": version.signature or None,
    }


def version_row(version: CampaignVersion) -> dict[str, Any]:
    """One line of GET /api/v1/campaigns/{slug}/versions/."""
    return {
        "version": version.version,
        "digest": version.digest,
        "state": version.state,
        "signature": version.signature or None,
        "published_at": version.published_at.isoformat() if version.published_at else None,
        "campaign_version": version.measured_from,
        "changes": version.changes,
        "manifest": version.manifest,
    }
