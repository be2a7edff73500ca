"""The campaign manifest of docs/protocol.md section 6, built from the definition and the patch files."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.urls import reverse
from rest_framework.request import Request

from benchhub.results import campaigns
from benchhub.results.models import Campaign


def manifest(campaign: Campaign, request: Request) -> dict[str, Any]:
    return manifest_for(campaign, lambda path: str(request.build_absolute_uri(path)))


def site_manifest(campaign: Campaign) -> dict[str, Any]:
    """The manifest with URLs made absolute by the site's own (BENCHHUB_PUBLIC_URL), where no request is."""
    base = settings.BENCHHUB_PUBLIC_URL.rstrip("/")
    return manifest_for(campaign, lambda path: base + path)


def manifest_for(campaign: Campaign, absolute: Callable[[str], str]) -> dict[str, Any]:
    """`absolute` makes a site path an absolute URL."""
    definition = campaign.definition

    def patch_url(name: str) -> str:
        return absolute(reverse("campaign-patch", args=[campaign.slug, name]))

    return {
        "slug": campaign.slug,
        "title": campaign.title,
        "description": campaign.description,
        "repo": campaign.repo,
        "baseline": campaign.baseline,
        "variants": [
            {
                "name": variant.name,
                "commit": variant.commit,
                "ref": variant.ref,
                "available": variant.available,
                "unavailable_reason": variant.unavailable_reason,
                "patches": [
                    {"name": patch.name, "sha256": patch.sha256, "url": patch_url(patch.name) if patch.sha256 else None}
                    for patch in variant.patches
                ],
                "env": variant.env,
            }
            for variant in campaigns.resolved_variants(definition)
        ],
        "sweep": definition["sweep"],
        "correctness": definition["correctness"],
    }
