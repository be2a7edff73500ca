"""The compare page: two chips (from leaderboard cells) or two submissions (from their own
measurements), side by side in one chart and one table."""

from __future__ import annotations

import uuid
from collections import defaultdict
from dataclasses import dataclass, replace

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_safe

from benchhub.accounts.models import Contributor
from benchhub.results.board import CellRow, chip_label, current_cell_rows
from benchhub.results.models import Submission
from benchhub.web import charts
from benchhub.web.choices import CampaignChoice, UnknownFilter, campaign_choices, compared_variant, pick_campaign
from benchhub.web.leaderboard import pair_text, short_id
from benchhub.web.pages import Chart, Page, submission_series
from benchhub.web.series import speedup_series
from benchhub.web.views import chips_by_slug
from benchhub.web.words import (
    control_label,
    interval_note,
    model_names,
    pending_note,
    prediction_note,
    short_sha,
    threshold_note,
)


@dataclass(frozen=True)
class CompareLine:
    label: str
    left: str
    right: str


def _as_uuid(text: str) -> uuid.UUID | None:
    try:
        return uuid.UUID(text)
    except ValueError:
        return None


def _chip_comparison(
    campaign: CampaignChoice, variant: str, left: tuple[str, int | None], right: tuple[str, int | None]
) -> tuple[list[Chart], list[CompareLine]]:
    """One chart and one block of lines per model file (by sha256) and backend; a variant that
    follows a ref is compared commit by commit."""
    both = current_cell_rows(campaign__slug=campaign.slug, variant=variant, chip__in=[left[0], right[0]])
    cells = [c for c in both if (c.chip, c.gpu_cores) in (left, right)]
    chart_list = []
    lines = []
    names = model_names([(c.model, c.model_sha256) for c in cells])
    files = sorted({(names[c.model_sha256], c.quant, c.model_sha256, c.backend, c.control) for c in cells})
    for index, (model, quant, sha256, backend, control) in enumerate(files):
        title = f"{model} ({quant}){f', {control_label(backend)}' if control else ''}"
        same_model = [c for c in cells if (c.model_sha256, c.backend) == (sha256, backend)]
        series = speedup_series([replace(c, control=False) for c in same_model], [], quant, variant)
        chart_list.append(
            Chart(
                f"compare-{index}",
                f"{title}: speedup of {variant} on both chips",
                charts.speedup_figure(series, f"{title}: {variant} over {campaign.baseline}"),
            )
        )
        commits = {c.commit for c in same_model}
        by_side: dict[tuple[int, str, tuple[str, int | None]], str] = {}
        for c in same_model:
            by_side[(c.batch_size, c.commit, (c.chip, c.gpu_cores))] = cell_text(c)
        for batch_size, commit in sorted({(bs, commit) for bs, commit, _ in by_side}):
            at = f" at {short_sha(commit)}" if len(commits) > 1 or variant in campaign.followers else ""
            lines.append(
                CompareLine(
                    f"{title} BS{batch_size}{at}",
                    by_side.get((batch_size, commit, left), "–"),
                    by_side.get((batch_size, commit, right), "–"),
                )
            )
    return chart_list, lines


def cell_text(c: CellRow) -> str:
    """A cell in one line: the numbers, what the interval is, where a new machine falls, the
    verdict in words and the machines pending."""
    if not c.n_machines:
        return ", ".join(["excluded", *([pending_note(c.n_pending)] if c.n_pending else [])])
    parts = [
        pair_text(c.baseline_tg_tps, c.tg_tps, c.speedup, c.verdict),
        interval_note(c.interval, c.ci_low, c.ci_high, c.n_machines),
        prediction_note(c.predict_low, c.predict_high, c.predict_level, c.tau, c.i2),
        c.verdict_text,
        pending_note(c.n_pending),
    ]
    return ", ".join(part for part in parts if part)


def _submission_comparison(left: Submission, right: Submission) -> tuple[list[Chart], list[CompareLine]]:
    measured = {side.pk: list(side.measurements.all()) for side in (left, right)}
    series = submission_series(measured[left.pk], f"A {short_id(left.pk)}: ") + submission_series(
        measured[right.pk], f"B {short_id(right.pk)}: ", dash="dash"
    )
    chart = Chart(
        "compare-submissions",
        "decode throughput of both submissions by batch size, A solid, B dashed, one colour per variant",
        charts.throughput_figure(series, "Decode t/s by batch size: A solid, B dashed, one colour per variant"),
    )
    cells: dict[tuple[str, int], dict[object, str]] = defaultdict(dict)
    for side in (left, right):
        for m in measured[side.pk]:
            text = pair_text(m.baseline_tg_tps, m.tg_tps, m.speedup)
            cells[(m.variant_name, m.batch_size)][side.pk] = text + (" excluded" if m.excluded_reason else "")
    lines = [
        CompareLine(f"{variant} BS{bs}", values.get(left.pk, "–"), values.get(right.pk, "–"))
        for (variant, bs), values in sorted(cells.items(), key=lambda item: (item[0][1], item[0][0]))
    ]
    return [chart], lines


PICKER_SIZE = 50


def _picker(chips: dict[str, tuple[str, int | None]], source: str) -> list[Submission]:
    """The newest submissions of one chip ("chip:<slug>") or one contributor ("contributor:<handle>"),
    to pick A and B from by name instead of pasting ids."""
    kind, _, key = source.partition(":")
    found = Submission.objects.public().select_related("contributor", "machine", "model_file")
    if kind == "chip" and key in chips:
        found = found.filter(chip=chips[key][0], gpu_cores=chips[key][1])
    elif kind == "contributor" and key:
        found = found.filter(contributor__handle__iexact=key)
    else:
        return []
    return list(found.order_by("-received_at", "-pk")[:PICKER_SIZE])


@require_safe
def compare(request: HttpRequest) -> HttpResponse:
    try:
        return _compare(request)
    except UnknownFilter as unknown:
        return unknown.response(request)


def _compare(request: HttpRequest) -> HttpResponse:
    choices = campaign_choices()
    chips = chips_by_slug(with_published=False)  # the comparison reads crowd cells only
    a, b = request.GET.get("a", "").strip(), request.GET.get("b", "").strip()
    source = request.GET.get("from", "").strip()
    picker = _picker(chips, source or (f"chip:{a}" if a in chips else ""))
    listed = {str(s.pk) for s in picker}
    context: dict[str, object] = {
        "page": Page("Compare"),
        "chip_options": sorted((chip_label(*value), slug) for slug, value in chips.items()),
        "contributors": list(
            Contributor.objects.filter(submissions__hidden=False)
            .distinct()
            .order_by("handle")
            .values_list("handle", flat=True)
        ),
        "source": source,
        "picker": picker,
        "a": a,
        "b": b,
        # A side names a listed submission, or none: then A takes the first and B the second (a chip's
        # slug in a and b selected nothing, and the browser showed the first submission on both).
        "sides": [(side, value if value in listed else "") for side, value in (("a", a), ("b", b))],
        "campaigns": [c for c in choices if c.live],
    }
    if not a or not b:
        return render(request, "web/compare.html", context)
    if a in chips and b in chips and choices:
        campaign = pick_campaign(choices, request.GET.get("campaign"))
        variant = compared_variant(campaign, request.GET.get("variant"))
        chart_list, lines = _chip_comparison(campaign, variant, chips[a], chips[b])
        demo = (
            Submission.objects.public()
            .filter(is_demo=True, campaign__slug=campaign.slug, chip__in=[chips[a][0], chips[b][0]])
            .exists()
        )
        context.update(
            demo=demo,
            kind="chips",
            campaign=campaign,
            variant=variant,
            left=chip_label(*chips[a]),
            right=chip_label(*chips[b]),
            charts=chart_list,
            lines=lines,
            threshold=threshold_note(campaign.min_effect),
        )
        return render(request, "web/compare.html", context)
    ids = [_as_uuid(a), _as_uuid(b)]
    found = {
        s.pk: s
        for s in Submission.objects.public()
        .filter(pk__in=[i for i in ids if i])
        .select_related("contributor", "machine", "model_file")
    }
    if ids[0] in found and ids[1] in found:
        left, right = found[ids[0]], found[ids[1]]
        chart_list, lines = _submission_comparison(left, right)
        context.update(
            demo=left.is_demo or right.is_demo,
            kind="submissions",
            left=left,
            right=right,
            charts=chart_list,
            lines=lines,
        )
        return render(request, "web/compare.html", context)
    context["error"] = "Pick two chips, or two submissions from a chip's or a contributor's list."
    return render(request, "web/compare.html", context, status=400)
