"""Building blocks of the pages: page titles, chart data islands, bounded lists, and the one
submission's detail (sweep reps, checks, verification command)."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from benchhub_agent.envelope import b64encode
from django.db.models import QuerySet
from django.http import HttpRequest
from django.urls import reverse

from benchhub.results.models import Measurement, Submission, SweepRun
from benchhub.web import charts
from benchhub.web.charts import Point, Series
from benchhub.web.leaderboard import chip_slug, format_change, format_tps

PAGE_SIZE = 50


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
    """One page of a list, fetched with LIMIT n+1 so that no COUNT runs over a large table."""

    items: list[Any]
    number: int
    has_next: bool

    @property
    def previous(self) -> int | None:
        return self.number - 1 if self.number > 1 else None

    @property
    def next(self) -> int | None:
        return self.number + 1 if self.has_next else None


def page_of(request: HttpRequest, queryset: QuerySet[Any]) -> Slice:
    try:
        number = max(1, int(request.GET.get("page", "1")))
    except ValueError:
        number = 1
    start = (number - 1) * PAGE_SIZE
    items = list(queryset[start : start + PAGE_SIZE + 1])
    return Slice(items[:PAGE_SIZE], number, len(items) > PAGE_SIZE)


@dataclass(frozen=True)
class SweepLine:
    variant: str
    batch_size: int
    reps: list[str]
    median: str
    spread: str
    change: str
    excluded: str


def sweep_lines(runs: list[SweepRun], measurements: list[Measurement]) -> tuple[list[int], list[SweepLine]]:
    """Every rep's decode t/s in execution order, beside the median and spread the cells used."""
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
                spread=f"{100 * m.spread:.1f}%",
                change=format_change(m.speedup),
                excluded=m.excluded_reason.replace("_", " "),
            )
        )
    return list(range(1, rep_count + 1)), lines


def submission_series(measurements: list[Measurement], prefix: str = "") -> list[Series]:
    by_variant: dict[str, list[Point]] = defaultdict(list)
    for m in measurements:
        by_variant[m.variant_name].append(Point(m.batch_size, m.tg_tps, n_submissions=1))
    return [Series(f"{prefix}{name}", tuple(points)) for name, points in by_variant.items()]


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


def submission_context(request: HttpRequest, submission: Submission) -> dict[str, Any]:
    variants = list(submission.variants.all())
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
    return {
        "page": Page(f"Submission {str(submission.pk)[:8]}"),
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
    }
