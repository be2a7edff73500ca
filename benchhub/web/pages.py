"""Building blocks of the pages: page titles, chart data islands, bounded lists, and the one
submission's detail (sweep reps, checks, verification command)."""

from __future__ import annotations

import uuid
from collections import defaultdict
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from benchhub_protocol.envelope import b64encode
from django.db.models import Q, QuerySet
from django.http import HttpRequest
from django.urls import reverse

from benchhub.results import flags, storage, versions
from benchhub.results.board import chip_label, chip_slug
from benchhub.results.campaigns import campaign_rules, variant_descriptions
from benchhub.results.models import Measurement, Submission, SweepRun
from benchhub.web import charts, exports
from benchhub.web.charts import Point, Series
from benchhub.web.leaderboard import format_change, format_tps, short_id
from benchhub.web.provenance import demo_note

PAGE_SIZE = 50
# Columns a submissions list never shows: JSON, decoded per row (five per row, most of the list's
# CPU while they were read).
LIST_DEFERRED = ("flags", "llama_cpp", "sweep_settings", "campaign__definition", "model_file__tensor_bytes_by_type")


@dataclass(frozen=True)
class Page:
    title: str


@dataclass(frozen=True)
class Chart:
    """A figure the page embeds as a JSON data island; `label` is what screen readers hear."""

    id: str
    label: str
    figure: charts.Figure


@dataclass(frozen=True)
class Slice:
    """Submissions newest first, PAGE_SIZE at a time, paged by a keyset cursor (the last row's
    received_at and id): no COUNT and no OFFSET, so the 2,000th page costs what the first does."""

    items: list[Submission]
    is_first: bool
    next_cursor: str | None


def _cursor_filter(cursor: str) -> Q | None:
    stamp, _, pk = cursor.partition("~")
    try:
        received_at, key = datetime.fromisoformat(stamp), uuid.UUID(pk)
        if received_at.tzinfo is None:
            return None
        # In UTC: PostgreSQL refuses offsets past ±15:59, which ISO 8601 allows up to ±23:59.
        received_at = received_at.astimezone(UTC)
    except (ValueError, OverflowError):  # OverflowError: an offset that moves year 1 or 9999 out of range
        return None
    # The leading range on received_at alone lets PostgreSQL walk its index from the cursor.
    return Q(received_at__lte=received_at) & (Q(received_at__lt=received_at) | Q(pk__lt=key))


def page_of(request: HttpRequest, queryset: QuerySet[Submission]) -> Slice:
    queryset = queryset.select_related("campaign", "model_file").defer(*LIST_DEFERRED)
    cursor = request.GET.get("before", "")
    condition = _cursor_filter(cursor) if cursor else None
    if condition is not None:
        queryset = queryset.filter(condition)
    items = list(queryset.order_by("-received_at", "-pk")[: PAGE_SIZE + 1])
    shown = items[:PAGE_SIZE]
    last = shown[-1] if len(items) > PAGE_SIZE else None
    return Slice(shown, condition is None, f"{last.received_at.isoformat()}~{last.pk}" if last else None)


@dataclass(frozen=True)
class SweepLine:
    variant: str
    batch_size: int
    reps: list[str]
    median: str
    rounds: str
    change: str
    excluded: str


def sweep_lines(runs: list[SweepRun], measurements: list[Measurement]) -> tuple[list[int], list[SweepLine]]:
    """Every rep's decode t/s in execution order, beside the medians over the rounds the cells used."""
    reps: dict[tuple[str, int], list[tuple[int, float]]] = defaultdict(list)
    for run in runs:
        for row in run.rows.all():
            reps[(run.variant.name, row.batch_size)].append((run.seq, row.tg_tps))
    rep_count = max((len(values) for values in reps.values()), default=0)
    lines = []
    for m in measurements:
        values = [format_tps(tps) for _, tps in sorted(reps.get((m.variant_name, m.batch_size), []))]
        lines.append(
            SweepLine(
                variant=m.variant_name,
                batch_size=m.batch_size,
                reps=values + [""] * (rep_count - len(values)),
                median=format_tps(m.tg_tps),
                rounds=str(m.n_rounds),
                change=format_change(m.speedup),
                excluded=m.excluded_reason.replace("_", " "),
            )
        )
    return list(range(1, rep_count + 1)), lines


def submission_series(measurements: list[Measurement], prefix: str = "", dash: str = "solid") -> list[Series]:
    by_variant: dict[str, list[Point]] = defaultdict(list)
    for m in measurements:
        if m.tg_tps is not None:
            by_variant[m.variant_name].append(Point(m.batch_size, m.tg_tps, n_machines=1))
    return [Series(f"{prefix}{name}", tuple(points), dash=dash, colour_key=name) for name, points in by_variant.items()]


VERIFY_SCRIPT = """curl -fsS {url} -o envelope.json
python3 - envelope.json {public_key} <<'EOF'
import base64, hashlib, json, sys
from nacl.signing import VerifyKey  # pip install pynacl
env = json.load(open(sys.argv[1]))
key = base64.b64decode(sys.argv[2])
body, kind = base64.b64decode(env["payload"]), env["payloadType"].encode()
pae = b"DSSEv1 %d %s %d %s" % (len(kind), kind, len(body), body)
sig = next(s for s in env["signatures"] if s["keyid"] == hashlib.sha256(key).hexdigest())
VerifyKey(key).verify(pae, base64.b64decode(sig["sig"]))
print("signature OK, keyid", sig["keyid"], "payload sha256", hashlib.sha256(body).hexdigest())
EOF"""


def verify_command(request: HttpRequest, submission: Submission) -> str:
    """A command that checks the signature with nothing from benchhub: curl, Python and PyNaCl."""
    url = request.build_absolute_uri(reverse("submission-envelope", args=[submission.pk]))
    return VERIFY_SCRIPT.format(url=url, public_key=b64encode(bytes(submission.key.public_key)))


@dataclass(frozen=True)
class QuantMixRow:
    type_name: str
    size: str
    share: str


def quant_mix_rows(tensor_bytes_by_type: dict[str, int]) -> list[QuantMixRow]:
    total = sum(tensor_bytes_by_type.values()) or 1
    ordered = sorted(tensor_bytes_by_type.items(), key=lambda item: (-item[1], item[0]))
    return [QuantMixRow(name, f"{size:,}", f"{100 * size / total:.1f}%") for name, size in ordered]


@dataclass(frozen=True)
class VariantLine:
    """A variant as measured: the commit it was built from, and the git ref its campaign version pinned
    that commit from, where it names one."""

    name: str
    commit: str
    ref: str | None
    patches: list[dict[str, str]]
    env: dict[str, str]
    about: str = ""  # the campaign definition's one line on this variant


def variant_lines(submission: Submission) -> list[VariantLine]:
    definition = versions.judged_by(submission)
    refs = {entry["name"]: entry.get("ref") for entry in definition["variants"]}
    about = variant_descriptions(definition)
    return [
        VariantLine(v.name, v.commit, refs.get(v.name), v.patches, v.env, about.get(v.name, ""))
        for v in submission.variants.all()
    ]


def submission_context(request: HttpRequest, submission: Submission) -> dict[str, Any]:
    variants = variant_lines(submission)
    runs = list(submission.sweep_runs.select_related("variant").prefetch_related("rows"))
    measurements = list(submission.measurements.all())
    rep_numbers, lines = sweep_lines(runs, measurements)
    model = submission.model_file
    figures = [
        Chart(
            "submission-tps",
            "decode throughput of each variant by batch size",
            charts.throughput_figure(submission_series(measurements), "Decode t/s by batch size (median of reps)"),
        ),
        Chart(
            "quant-mix",
            "share of the model's bytes per tensor type",
            charts.quant_mix_figure(model.tensor_bytes_by_type),
        ),
    ]
    machine = submission.machine
    payload = storage.stored_payload(bytes(submission.raw.body))
    markdown = exports.submission_table(
        measurements,
        submission.campaign.baseline,
        title=(
            f"{submission.campaign.slug}: {chip_label(machine.chip, machine.gpu_cores)}, {model} ({model.file_type}),"
            f" submission {short_id(submission.pk)}"
        ),
        permalink=request.build_absolute_uri(reverse("submission", args=[submission.pk])),
    )
    return {
        "page": Page(f"Submission {short_id(submission.pk)}"),
        "markdown": demo_note(markdown, submission.is_demo),
        "chip_slug": chip_slug(submission.machine.chip, submission.machine.gpu_cores),
        "submission": submission,
        "variants": variants,
        "rep_numbers": rep_numbers,
        "sweep_lines": lines,
        "correctness": list(submission.correctness.select_related("variant")),
        "generation": list(submission.generation.select_related("variant")),
        "charts": figures,
        "verify_command": verify_command(request, submission),
        "quant_mix": quant_mix_rows(model.tensor_bytes_by_type),
        "sweep_differences": (
            flags.nonstandard_reasons(payload, versions.judged_by(submission))
            if flags.NONSTANDARD_SWEEP in submission.flags
            else []
        ),
        "implausible": (
            flags.implausible(payload, campaign_rules(versions.judged_by(submission)))
            if flags.QUARANTINED in submission.flags
            else []
        ),
    }
