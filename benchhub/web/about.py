"""The About page's live parts: the verdict words, the rules each campaign judges by, the
bandwidth table, the probation period, and the live false-verdict rate of the controls (rows on a
backend a campaign's patches do not touch compare identical code, so any "faster" or "slower"
among them is a false verdict; the method promises at most 5% per chip page)."""

from __future__ import annotations

from dataclasses import dataclass

from django.conf import settings
from django.db.models import Count, F, Q
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_safe

from benchhub.results import plausibility
from benchhub.results.campaigns import backend_name, campaign_rules
from benchhub.results.models import Campaign, LeaderboardCell
from benchhub.web import wheel
from benchhub.web.pages import Page
from benchhub.web.words import ABOUT_VERDICTS, DIRECTIONAL, TOO_FEW, percent, plural

PAGE_FIELDS = ("campaign_id", "chip", "gpu_cores", "model_sha256", "backend")
PROMISED_PAGE_RATE = 0.05


@dataclass(frozen=True)
class CampaignRules:
    slug: str
    min_effect: str
    plausible: str
    patched: str


@dataclass(frozen=True)
class ControlRate:
    """Of the control pages with at least one judged cell (a verdict other than "too few machines"),
    how many show any "faster" or "slower"; the same for cells."""

    pages: int
    false_pages: int
    cells: int
    false_cells: int

    @property
    def page_rate(self) -> str:
        return f"{self.false_pages / self.pages:.1%}" if self.pages else "–"

    @property
    def cell_rate(self) -> str:
        return f"{self.false_cells / self.cells:.1%}" if self.cells else "–"

    @property
    def within_promise(self) -> bool:
        return not self.pages or self.false_pages / self.pages <= PROMISED_PAGE_RATE

    @property
    def sentence(self) -> str:
        if not self.pages:
            return "No control page has a verdict yet."
        return (
            f"{self.false_pages} of {plural(self.pages, 'control page')} ({self.page_rate}) show a “faster” or "
            f"“slower”; per cell, {self.false_cells} of {self.cells} ({self.cell_rate})."
        )


def control_rate() -> ControlRate:
    judged = (
        LeaderboardCell.objects.filter(control=True, n_machines__gt=0)
        .exclude(verdict=TOO_FEW)
        .exclude(variant=F("campaign__baseline"))  # the baseline against itself is 1 by construction
    )
    pages = judged.order_by().values(*PAGE_FIELDS).annotate(false=Count("id", filter=Q(verdict__in=DIRECTIONAL)))
    listed = list(pages)
    return ControlRate(
        pages=len(listed),
        false_pages=sum(1 for page in listed if page["false"]),
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
