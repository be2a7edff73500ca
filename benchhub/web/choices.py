"""What a leaderboard request chooses among: the campaigns (live, or known only from published
rows), the compared variant, the model file and the quant filter, each read from the database and
checked against what exists; an unknown value is a 400 page (UnknownFilter), never a default board."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from benchhub_protocol.words import DEFAULT_MIN_EFFECT
from django.db.models import Max
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from benchhub.results.campaigns import campaign_rules, variant_descriptions
from benchhub.results.models import Campaign, LeaderboardCell
from benchhub.results.published import ReferenceRow
from benchhub.web.pages import Page
from benchhub.web.words import model_names

FIRST_CAMPAIGN = "mv-ext-iquants"


@dataclass(frozen=True)
class CampaignChoice:
    """A campaign on the switcher: a live one from the database, or one known only from
    published reference rows (no crowd results can exist for it yet)."""

    slug: str
    title: str
    baseline: str
    variants: tuple[str, ...]
    live: bool
    followers: tuple[str, ...] = ()  # variants that follow a git ref: their cells are keyed by resolved commit
    min_effect: float = DEFAULT_MIN_EFFECT
    descriptions: tuple[tuple[str, str], ...] = ()  # (variant, one line from the campaign definition)
    patched_backends: tuple[str, ...] = ()  # the backends its patches change ("metal")

    @property
    def variant_notes(self) -> list[tuple[str, str]]:
        return [(name, about) for name, about in self.descriptions if about]


@dataclass(frozen=True)
class ModelChoice:
    sha256: str
    label: str  # the display name, with a short sha where two files share it
    quant: str
    n_machines: int  # the most machines (keys) any one of its cells counts, as a ranking line counts


def model_choices(campaign: CampaignChoice) -> list[ModelChoice]:
    """The campaign's model files, the one measured on the most machines first (the default)."""
    if not campaign.live:
        return []
    found = (
        LeaderboardCell.objects.filter(campaign__slug=campaign.slug)
        .values("model_sha256", "model", "quant")
        .annotate(most=Max("n_machines"))
        .order_by("-most", "model", "model_sha256")
    )
    rows: dict[str, dict[str, Any]] = {}
    for row in found:
        rows.setdefault(row["model_sha256"], row)
    labels = model_names([(row["model"], sha256) for sha256, row in rows.items()])
    return [ModelChoice(sha256, labels[sha256], row["quant"], row["most"]) for sha256, row in rows.items()]


def pick_model(choices: list[ModelChoice], sha256: str | None) -> ModelChoice | None:
    found = next((choice for choice in choices if choice.sha256 == sha256), None)
    if sha256 and found is None:
        raise UnknownFilter("model", sha256, [choice.sha256 for choice in choices])
    return found or (choices[0] if choices else None)


def pick_quant(campaign: CampaignChoice, requested: str) -> str:
    """The quant filter of the ranking, lowercased as the board compares it; one of the campaign's."""
    if not requested:
        return ""
    known = set(ReferenceRow.objects.filter(campaign_slug=campaign.slug).values_list("quant", flat=True))
    if campaign.live:
        known |= set(LeaderboardCell.objects.filter(campaign__slug=campaign.slug).values_list("quant", flat=True))
    if requested.lower() not in {quant.lower() for quant in known}:
        raise UnknownFilter("quant", requested, sorted(known))
    return requested.lower()


def campaign_choices() -> list[CampaignChoice]:
    choices = [
        CampaignChoice(
            c.slug,
            c.title,
            c.baseline,
            tuple(c.variant_names),
            True,
            tuple(v["name"] for v in c.definition["variants"] if v.get("ref")),
            campaign_rules(c.definition).min_effect,
            tuple(variant_descriptions(c.definition).items()),
            tuple(sorted(campaign_rules(c.definition).patched_backends)),
        )
        for c in Campaign.objects.only("slug", "title", "baseline", "definition")
    ]
    live = {choice.slug for choice in choices}
    published: dict[str, tuple[str, set[str]]] = {}
    for slug, baseline, variant in ReferenceRow.objects.values_list("campaign_slug", "baseline_variant", "variant"):
        if slug not in live:
            published.setdefault(slug, (baseline, set()))[1].add(variant)
    choices += [
        CampaignChoice(slug, slug, baseline, (baseline, *sorted(variants)), False)
        for slug, (baseline, variants) in published.items()
    ]
    return sorted(choices, key=lambda c: (c.slug != FIRST_CAMPAIGN, not c.live, c.slug))


class UnknownFilter(Exception):
    """A filter value the page does not know (issues 30 and 33): answered with 400, never a default
    board, and never a cache entry of its own."""

    def __init__(self, field: str, value: str, known: list[str]) -> None:
        super().__init__(f"unknown {field} {value!r}")
        self.field, self.value, self.known = field, value, known

    def response(self, request: HttpRequest) -> HttpResponse:
        context = {"page": Page(f"Unknown {self.field}"), "field": self.field, "value": self.value}
        return render(request, "web/bad_filter.html", context | {"known": self.known[:50]}, status=400)


def pick_campaign(choices: list[CampaignChoice], slug: str | None) -> CampaignChoice:
    for choice in choices:
        if choice.slug == slug:
            return choice
    if slug:
        raise UnknownFilter("campaign", slug, [choice.slug for choice in choices])
    return choices[0]


def compared_variant(campaign: CampaignChoice, requested: str | None) -> str:
    candidates = [name for name in campaign.variants if name != campaign.baseline]
    if requested in candidates:
        return str(requested)
    if requested:
        raise UnknownFilter("variant", requested, candidates)
    return candidates[0] if candidates else campaign.baseline
