"""Server-rendered pages. Leaderboard, chip and compare pages read precomputed LeaderboardCell and
ReferenceRow rows only; submission and contributor pages read one submission's or one contributor's
own rows, with bounded page sizes."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render
from django.views.decorators.http import require_safe

from benchhub.accounts.models import Contributor
from benchhub.results.models import Campaign, LeaderboardCell, Submission
from benchhub.web import charts
from benchhub.web.leaderboard import (
    CellRow,
    ChipQuantGroup,
    build_board,
    chip_label,
    chip_slug,
    coverage,
    reference_throughput_series,
    speedup_series,
    throughput_series,
)
from benchhub.web.models import ReferenceRow
from benchhub.web.pages import Chart, Page, page_of, submission_context

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


@dataclass(frozen=True)
class QuantSection:
    """The home page reads quant by quant: a chart across chips, then each chip's table."""

    quant: str
    chart: Chart
    groups: list[ChipQuantGroup]


def campaign_choices() -> list[CampaignChoice]:
    choices = [
        CampaignChoice(c.slug, c.title, c.baseline, tuple(c.variant_names), True)
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


def pick_campaign(choices: list[CampaignChoice], slug: str | None) -> CampaignChoice:
    for choice in choices:
        if choice.slug == slug:
            return choice
    if slug:
        raise Http404("No such campaign.")
    return choices[0]


def compared_variant(campaign: CampaignChoice, requested: str | None) -> str:
    candidates = [name for name in campaign.variants if name != campaign.baseline]
    if requested in candidates:
        return str(requested)
    return candidates[0] if candidates else campaign.baseline


def cell_rows(**filters: Any) -> list[CellRow]:
    rows = LeaderboardCell.objects.filter(**filters).values_list(*CellRow._fields)
    return [CellRow(*row) for row in rows]


def _cells(campaign: CampaignChoice, **filters: Any) -> list[CellRow]:
    return cell_rows(campaign__slug=campaign.slug, **filters) if campaign.live else []


@require_safe
def home(request: HttpRequest) -> HttpResponse:
    choices = campaign_choices()
    if not choices:
        return render(request, "web/home.html", {"page": Page("Leaderboard"), "empty": True})
    campaign = pick_campaign(choices, request.GET.get("campaign"))
    variant = compared_variant(campaign, request.GET.get("variant"))
    cells = _cells(campaign)
    references = list(ReferenceRow.objects.for_campaign(campaign.slug))
    board = build_board(cells, references, campaign.baseline, campaign.variants)
    sections = [
        QuantSection(
            quant,
            Chart(
                f"speedup-{index}",
                f"{quant}: speedup of {variant} over {campaign.baseline} by batch size, one line per chip",
                charts.speedup_figure(
                    speedup_series(cells, references, quant, variant),
                    f"{quant}: {variant} over {campaign.baseline}, by chip",
                ),
            ),
            [group for group in board if group.quant == quant],
        )
        for index, quant in enumerate(sorted({group.quant for group in board}))
    ]
    coverage_rows, other_chips = coverage(c.chip for c in cells if c.n_submissions)
    context = {
        "page": Page("Leaderboard"),
        "campaigns": choices,
        "campaign": campaign,
        "variant": variant,
        "sections": sections,
        "charts": [section.chart for section in sections],
        "coverage": coverage_rows,
        "other_chips": other_chips,
        "has_crowd_rows": any(c.n_submissions for c in cells),
    }
    return render(request, "web/home.html", context)


@dataclass(frozen=True)
class ChipSection:
    campaign: CampaignChoice
    board: list[ChipQuantGroup]
    charts: list[Chart]


def chips_by_slug(with_published: bool = True) -> dict[str, tuple[str, int | None]]:
    """Chips with a page: crowd cells' chips, plus (for chip pages) those known only from
    published rows."""
    known = set(LeaderboardCell.objects.values_list("chip", "gpu_cores").distinct())
    if with_published:
        known |= set(ReferenceRow.objects.values_list("chip", "gpu_cores").distinct())
    return {chip_slug(chip, cores): (chip, cores) for chip, cores in known}


@require_safe
def chip(request: HttpRequest, slug: str) -> HttpResponse:
    found = chips_by_slug().get(slug)
    if found is None:
        raise Http404("No results for this chip yet.")
    name, cores = found
    sections = []
    for campaign in campaign_choices():
        cells = _cells(campaign, chip=name, gpu_cores=cores)
        references = list(ReferenceRow.objects.for_campaign(campaign.slug).for_chip(name, cores))
        if not cells and not references:
            continue
        board = build_board(cells, references, campaign.baseline, campaign.variants)
        chart_list = [
            Chart(
                f"tps-{campaign.slug}-{group.quant}".lower(),
                f"{group.quant}: decode throughput per variant",
                charts.throughput_figure(
                    throughput_series(cells, group.quant, campaign.baseline)
                    + reference_throughput_series(references, group.quant),
                    f"{group.quant}: decode t/s by batch size",
                ),
            )
            for group in board
            if group.rows
        ]
        sections.append(ChipSection(campaign, board, chart_list))
    submissions = Submission.objects.public().filter(machine__chip=name, machine__gpu_cores=cores)
    context = {
        "page": Page(chip_label(name, cores)),
        "chip": name,
        "gpu_cores": cores,
        "slug": slug,
        "sections": sections,
        "charts": [chart for section in sections for chart in section.charts],
        "submissions": page_of(request, submissions.select_related("contributor", "model_file", "campaign")),
    }
    return render(request, "web/chip.html", context)


@require_safe
def submission(request: HttpRequest, pk: str) -> HttpResponse:
    found = get_object_or_404(
        Submission.objects.public().select_related("campaign", "contributor", "key", "machine", "model_file"), pk=pk
    )
    return render(request, "web/submission.html", submission_context(request, found))


@require_safe
def submission_envelope(request: HttpRequest, pk: str) -> HttpResponse:
    """The stored envelope, byte for byte, so anyone can verify the signature themselves."""
    found = get_object_or_404(Submission.objects.public().select_related("raw"), pk=pk)
    response = HttpResponse(bytes(found.raw.body), content_type="application/json")
    response["Content-Disposition"] = f'attachment; filename="benchhub-{found.pk}.envelope.json"'
    return response


@require_safe
def contributor(request: HttpRequest, handle: str) -> HttpResponse:
    person = get_object_or_404(Contributor, handle__iexact=handle)
    submissions = Submission.objects.public().filter(contributor=person)
    context = {
        "page": Page(person.handle),
        "person": person,
        "keys": list(person.keys.all()),
        "submissions": page_of(request, submissions.select_related("machine", "model_file", "campaign")),
    }
    return render(request, "web/contributor.html", context)


@require_safe
def about(request: HttpRequest) -> HttpResponse:
    return render(request, "web/about.html", {"page": Page("About and method")})
