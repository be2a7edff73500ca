"""A campaign's page of versions: each with its state, digest, signature and what it changed, and the
cells of superseded versions, kept and shown apart (never pooled with the current ones, never ranked)."""

from __future__ import annotations

from dataclasses import dataclass

from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render
from django.views.decorators.http import require_safe

from benchhub.results.models import Campaign, CampaignVersion, LeaderboardCell
from benchhub.web.pages import Page


@dataclass(frozen=True)
class VersionView:
    version: CampaignVersion
    superseded_cells: list[LeaderboardCell]  # the cells numbered by this version, when superseded


@require_safe
def campaign(request: HttpRequest, slug: str) -> HttpResponse:
    found = get_object_or_404(Campaign, slug=slug)
    superseded: dict[int, list[LeaderboardCell]] = {}
    for cell in LeaderboardCell.objects.filter(campaign=found, superseded=True).order_by(
        "campaign_version", "chip", "gpu_cores", "model", "variant", "batch_size"
    ):
        superseded.setdefault(cell.campaign_version, []).append(cell)
    rows = [
        VersionView(version, superseded.get(version.version, [])) for version in found.versions.order_by("-version")
    ]
    context = {"page": Page(f"{found.slug}: versions"), "campaign": found, "versions": rows}
    return render(request, "web/campaign.html", context)
