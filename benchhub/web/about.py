"""The About page's live parts: the verdict words, the rules each campaign judges by, the
bandwidth table, the probation period, and the live false-verdict rate of the controls (rows on a
backend a campaign's patches do not touch compare identical code, so any "faster" or "slower"
among them is a false verdict; the method promises at most 5% per group)."""

from __future__ import annotations

from dataclasses import dataclass

from benchhub_protocol.words import DIRECTIONAL, TOO_FEW
from django.conf import settings
from django.db.models import Count, F, Q
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_safe

from benchhub.results import plausibility
from benchhub.results.board import GROUP_KEY
from benchhub.results.campaigns import backend_name, campaign_rules
from benchhub.results.models import Campaign, LeaderboardCell
from benchhub.web import wheel
from benchhub.web.pages import Page
from benchhub.web.words import ABOUT_VERDICTS, percent, plural

PROMISED_GROUP_RATE = 0.05


@dataclass(frozen=True)
class CampaignRules:
    slug: str
    min_effect: str
    plausible: str
    patched: str


@dataclass(frozen=True)
class ControlRate:
    """Of the control groups with at least one judged cell (a verdict other than "too few machines"),
    how many show any "faster" or "slower"; the same for cells."""

    groups: int
    false_groups: int
    cells: int
    false_cells: int

    @property
    def group_rate(self) -> str:
        return f"{self.false_groups / self.groups:.1%}" if self.groups else "–"

    @property
    def cell_rate(self) -> str:
        return f"{self.false_cells / self.cells:.1%}" if self.cells else "–"

    @property
    def within_promise(self) -> bool:
        return not self.groups or self.false_groups / self.groups <= PROMISED_GROUP_RATE

    @property
    def sentence(self) -> str:
        if not self.groups:
            return "No control group has a verdict yet."
        return (
            f"{self.false_groups} of {plural(self.groups, 'control group')} ({self.group_rate}) show a “faster” or "
            f"“slower”; per cell, {self.false_cells} of {self.cells} ({self.cell_rate})."
        )


def control_rate() -> ControlRate:
    judged = (
        LeaderboardCell.objects.filter(control=True, n_machines__gt=0)
        .exclude(verdict=TOO_FEW)
        .exclude(variant=F("campaign__baseline"))  # the baseline against itself is 1 by construction
    )
    groups = judged.order_by().values(*GROUP_KEY).annotate(false=Count("id", filter=Q(verdict__in=DIRECTIONAL)))
    listed = list(groups)
    return ControlRate(
        groups=len(listed),
        false_groups=sum(1 for group in listed if group["false"]),
        cells=judged.count(),
        false_cells=judged.filter(verdict__in=DIRECTIONAL).count(),
    )


def campaign_rule_rows() -> list[CampaignRules]:
    rows = []
    for campaign in Campaign.objects.only("slug", "definition").order_by("slug"):
        rules = campaign_rules(campaign.definition)
        low, high = rules.plausible_ratio
        rows.append(
            CampaignRules(
                campaign.slug,
                percent(rules.min_effect),
                f"{low:.3g}× to {high:.3g}×",
                ", ".join(sorted(backend_name(name) for name in rules.patched_backends)),
            )
        )
    return rows


def duration(seconds: int) -> str:
    if seconds <= 0:
        return "off"
    if seconds % 3600 == 0:
        return plural(seconds // 3600, "hour")
    return plural(seconds, "second")


@require_safe
def about(request: HttpRequest) -> HttpResponse:
    bandwidth = [(chip, f"{per_s / 1e9:g}", source) for chip, (per_s, source) in sorted(plausibility.table().items())]
    context = {
        "page": Page("About and method"),
        "wheel": wheel.install_line(request),
        "verdict_sentences": ABOUT_VERDICTS,
        "campaign_rules": campaign_rule_rows(),
        "bandwidth": bandwidth,
        "bandwidth_margin": f"{plausibility.MARGIN:g}",
        "bandwidth_ceiling": f"{plausibility.CEILING_BYTES_PER_S / 1e9:g}",
        "probation": duration(settings.BENCHHUB_KEY_PROBATION_S),
        "controls": control_rate(),
    }
    return render(request, "web/about.html", context)
