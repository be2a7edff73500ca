"""Server-rendered pages. Leaderboard, chip and compare pages read precomputed LeaderboardCell and
ReferenceRow rows only, and the leaderboard and chip pages render their boards once per version of
those rows, at most once per staleness bound while the cells keep changing (results/readcache.py);
submission and contributor pages read one submission's or one contributor's own rows, with bounded
page sizes."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils.safestring import SafeString
from django.views.decorators.http import require_safe

from benchhub.accounts.models import ChipName, Contributor
from benchhub.results.board import CellRow, HeadlineRow, chip_label, chip_slug, current_cell_rows, current_headline_rows
from benchhub.results.models import LeaderboardCell, Submission
from benchhub.results.published import ReferenceRow, ReferenceRowQuerySet
from benchhub.results.readcache import cached_render
from benchhub.web import charts, exports, wheel
from benchhub.web.choices import (
    CampaignChoice,
    ModelChoice,
    UnknownFilter,
    campaign_choices,
    compared_variant,
    model_choices,
    pick_campaign,
    pick_model,
    pick_quant,
)
from benchhub.web.leaderboard import GroupTable, build_board, coverage
from benchhub.web.pages import Chart, Page, page_of, submission_context
from benchhub.web.provenance import Provenance, demo_note, provenance
from benchhub.web.ranking import rank, ranking_rows
from benchhub.web.series import reference_throughput_series, speedup_series, throughput_series
from benchhub.web.words import threshold_note


def _headlines(campaign: CampaignChoice) -> list[HeadlineRow]:
    if not campaign.live:
        return []
    return current_headline_rows(campaign__slug=campaign.slug)


def _cells(campaign: CampaignChoice, **filters: Any) -> list[CellRow]:
    return current_cell_rows(campaign__slug=campaign.slug, **filters) if campaign.live else []


PublishedRows = tuple[Mapping[str, Any], ...]


def published_rows(rows: ReferenceRowQuerySet) -> PublishedRows:
    """Published rows, every field: a cached board is keyed on their content, since they are few
    and load_reference_rows updates them in place."""
    return tuple(rows.values())


def _references(published: PublishedRows) -> list[ReferenceRow]:
    return [ReferenceRow(**row) for row in published]


@dataclass(frozen=True)
class RenderedBoard:
    """The part of a page drawn from cells and published rows, rendered once per version of them;
    the page around it (forms, query parameters, lists) is rendered per request."""

    html: SafeString
    has_charts: bool
    demo: bool = False  # demo submissions are on it: its exports say so too


def _home_board(
    campaign: CampaignChoice, variant: str, model: ModelChoice | None, quant_filter: str, published: PublishedRows
) -> RenderedBoard:
    """The ranking of every chip and model file, then the chosen model's speedup chart."""
    every_cell = _cells(campaign)
    references = _references(published)
    found = provenance(campaign.slug) if campaign.live else Provenance()
    ranked = rank(every_cell, _headlines(campaign), references, variant, campaign.followers)
    every_line = found.mark_lines(ranked, every_cell, variant, campaign.patched_backends)
    lines = [
        line for line in every_line if not line.control and (not quant_filter or line.quant.lower() == quant_filter)
    ]
    controls = [line for line in every_line if line.control]
    batch_sizes = sorted({c.batch_size for c in every_cell} | {r.batch_size for r in references})
    cells = [c for c in every_cell if model and c.model_sha256 == model.sha256]
    # The chosen model's chart; a campaign with no crowd rows yet charts its published rows.
    quant = model.quant if model else (references[0].quant if references else "")
    label = model.label if model else "published rows"
    chart = (
        Chart(
            "speedup-0",
            f"{label} ({quant}): speedup of {variant} over {campaign.baseline} by batch size, by chip",
            charts.speedup_figure(
                speedup_series(cells, [r for r in references if r.quant == quant], quant, variant),
                f"{label} ({quant}): {variant} over {campaign.baseline}, by chip",
            ),
        )
        if quant
        else None
    )
    coverage_rows, other_chips = coverage(c.chip for c in every_cell if c.n_machines and not c.control)
    context = {
        "campaign": campaign,
        "variant": variant,
        "model": model,
        "ranking": ranking_rows(lines, batch_sizes),
        "controls": ranking_rows(controls, batch_sizes),
        "threshold": threshold_note(campaign.min_effect),
        "quants": sorted({line.quant for line in every_line}),
        "quant": quant_filter,
        "chart": chart,
        "chart_label": f"{label} ({quant})",
        "coverage": coverage_rows,
        "other_chips": other_chips,
        "has_crowd_rows": any(c.n_machines for c in every_cell),
        "demo": bool(found.demo),
    }
    html = render_to_string("web/_home_board.html", context)
    return RenderedBoard(html, chart is not None, bool(found.demo))


def _campaign_markdown(request: HttpRequest, campaign: CampaignChoice, variant: str, model: ModelChoice) -> str:
    query = urlencode({"campaign": campaign.slug, "variant": variant, "model": model.sha256})
    return exports.campaign_table(
        _cells(campaign, model_sha256=model.sha256, variant=variant),
        variant,
        title=f"{campaign.slug}: {variant} over {campaign.baseline}, {model.label} ({model.quant})",
        permalink=request.build_absolute_uri(f"{reverse('home')}?{query}"),
    )


@require_safe
def home(request: HttpRequest) -> HttpResponse:
    try:
        return _home(request)
    except UnknownFilter as unknown:
        return unknown.response(request)


def _home(request: HttpRequest) -> HttpResponse:
    choices = campaign_choices()
    if not choices:
        return render(request, "web/home.html", {"page": Page("Leaderboard"), "empty": True})
    campaign = pick_campaign(choices, request.GET.get("campaign"))
    variant = compared_variant(campaign, request.GET.get("variant"))
    models = model_choices(campaign)
    model = pick_model(models, request.GET.get("model"))
    quant = pick_quant(campaign, request.GET.get("quant", "").strip())
    cells = LeaderboardCell.objects.filter(campaign__slug=campaign.slug)  # none if known only from published rows
    published = published_rows(ReferenceRow.objects.for_campaign(campaign.slug))
    board = cached_render(
        "home",
        (campaign, variant, model.sha256 if model else None, quant, published),  # counts move with the cells
        cells,
        lambda: _home_board(campaign, variant, model, quant, published),
    )
    context = {
        "page": Page("Leaderboard"),
        "campaigns": choices,
        "campaign": campaign,
        "variant": variant,
        "models": models,
        "model": model,
        "board": board.html,
        "charts": board.has_charts,  # base.html loads plotly.js only for pages with charts
        "markdown": demo_note(_campaign_markdown(request, campaign, variant, model), board.demo) if model else "",
        "wheel": wheel.install_line(request),
    }
    return render(request, "web/home.html", context)


@dataclass(frozen=True)
class ChipSection:
    campaign: CampaignChoice
    board: list[GroupTable]
    charts: list[Chart]
    threshold: str = ""


def _backend_note(group: GroupTable) -> str:
    return f", {group.control_label}" if group.control else ""


def chips_by_slug(with_published: bool = True) -> dict[str, tuple[str, int | None]]:
    """Chips with a page: crowd cells' chips, plus (for chip pages) those known only from
    published rows."""
    # order_by(): a default ordering's columns would join the DISTINCT, one row per cell, not per chip.
    known = set(LeaderboardCell.objects.order_by().values_list("chip", "gpu_cores").distinct())
    if with_published:
        known |= set(ReferenceRow.objects.order_by().values_list("chip", "gpu_cores").distinct())
    # Ingest gives each slug one spelling (accounts.names); where older rows still spell one chip
    # two ways, the registered spelling takes the page, then the first in order: never by chance.
    registered = set(ChipName.objects.values_list("name", flat=True))
    found: dict[str, tuple[str, int | None]] = {}
    for chip, cores in sorted(known, key=lambda item: (item[0] not in registered, item[0], item[1] or 0)):
        found.setdefault(chip_slug(chip, cores), (chip, cores))
    return found


def _chip_board(name: str, cores: int | None, choices: list[CampaignChoice], published: PublishedRows) -> RenderedBoard:
    sections = []
    demo = False
    every_reference = _references(published)
    for campaign in choices:
        cells = _cells(campaign, chip=name, gpu_cores=cores)
        references = [ref for ref in every_reference if ref.campaign_slug == campaign.slug]
        if not cells and not references:
            continue
        board = build_board(cells, references, campaign.baseline, campaign.variants, campaign.followers)
        found = provenance(campaign.slug, chip=name, gpu_cores=cores) if cells else Provenance()
        found.mark_groups(board, cells, campaign.baseline, campaign.patched_backends)
        demo = demo or bool(found.demo)
        chart_list = [
            Chart(
                f"tps-{campaign.slug}-{index}",
                f"{group.model} ({group.quant}){_backend_note(group)}: decode throughput per variant",
                charts.throughput_figure(
                    throughput_series(
                        [c for c in cells if (c.model_sha256, c.backend) == (group.model_sha256, group.backend)],
                        group.quant,
                        campaign.baseline,
                    )
                    + ([] if group.control else reference_throughput_series(references, group.quant)),
                    f"{group.model} ({group.quant}){_backend_note(group)}: decode t/s by batch size",
                ),
            )
            for index, group in enumerate(board)
            if group.rows
        ]
        sections.append(ChipSection(campaign, board, chart_list, threshold_note(campaign.min_effect)))
    html = render_to_string("web/_chip_board.html", {"sections": sections, "demo": demo})
    return RenderedBoard(html, any(section.charts for section in sections), demo)


@require_safe
def chip(request: HttpRequest, slug: str) -> HttpResponse:
    found = chips_by_slug().get(slug)
    if found is None:
        raise Http404("No results for this chip yet.")
    name, cores = found
    choices = campaign_choices()
    cells = LeaderboardCell.objects.filter(chip=name, gpu_cores=cores)
    published = published_rows(ReferenceRow.objects.for_chip(name, cores))
    board = cached_render(
        "chip", (name, cores, choices, published), cells, lambda: _chip_board(name, cores, choices, published)
    )
    submissions = Submission.objects.public().filter(chip=name, gpu_cores=cores)
    markdown = exports.chip_table(
        [(c.slug, c.baseline, _cells(c, chip=name, gpu_cores=cores)) for c in choices if c.live],
        title=chip_label(name, cores),
        permalink=request.build_absolute_uri(reverse("chip", args=[slug])),
    )
    context = {
        "markdown": demo_note(markdown, board.demo),
        "page": Page(chip_label(name, cores)),
        "chip": name,
        "gpu_cores": cores,
        "slug": slug,
        "board": board.html,
        "charts": board.has_charts,  # base.html loads plotly.js only for pages with charts
        "submissions": page_of(request, submissions.select_related("contributor")),
    }
    return render(request, "web/chip.html", context)


@require_safe
def submission(request: HttpRequest, pk: str) -> HttpResponse:
    found = get_object_or_404(
        Submission.objects.public().select_related("campaign", "contributor", "key", "machine", "model_file"), pk=pk
    )
    return render(request, "web/submission.html", submission_context(request, found))


@require_safe
def envelope_json(request: HttpRequest, pk: str) -> HttpResponse:
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
        "submissions": page_of(request, submissions.select_related("machine")),
    }
    return render(request, "web/contributor.html", context)
