"""Read endpoints (docs/protocol.md section 6) and the submissions collection, whose POST is the ingest."""

from __future__ import annotations

import base64
import csv
from collections.abc import Iterator, Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db.models import QuerySet
from django.http import FileResponse, HttpResponse, HttpResponseNotModified, StreamingHttpResponse
from django.http.response import HttpResponseBase
from django.shortcuts import get_object_or_404
from django.utils.http import http_date
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework.generics import ListAPIView, RetrieveAPIView
from rest_framework.renderers import JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.throttling import BaseThrottle
from rest_framework.views import APIView

from benchhub.api import examples, filters, serializers, snapshot, tasks
from benchhub.api.errors import ApiError, error_body
from benchhub.api.exports import CSV_COLUMNS, CSV_SOURCES, csv_complete_line, csv_rows, csv_value
from benchhub.api.ingest_views import ERRORS, SubmissionIngestMixin
from benchhub.api.manifest import manifest, version_row
from benchhub.api.pagination import ByIdDescending, NewestFirst
from benchhub.api.throttling import AddressThrottle, ExportThrottle, ReadThrottle
from benchhub.results import board, campaigns
from benchhub.results.models import Campaign, LeaderboardCell, Measurement, Submission
from benchhub.results.readcache import cached_render

SUBMISSION_FILTERS = {
    "campaign": "campaign__slug",
    "chip": "chip",
    "gpu_cores": "gpu_cores",
    "quant": "quant",
    "model": "model_sha256",
    "variant": "variants__name",
    "batch_size": "measurements__batch_size",
    "contributor": "contributor__handle__iexact",
}
SUBMISSION_TO_MANY_FILTERS = ("variant", "batch_size")
MEASUREMENT_FILTERS = {
    "campaign": "campaign__slug",
    "chip": "chip",
    "gpu_cores": "gpu_cores",
    "quant": "quant",
    "model": "model_sha256",
    "variant": "variant_name",
    "batch_size": "batch_size",
    "contributor": "contributor__handle__iexact",
}
CELL_FILTERS = {
    **{name: name for name in ("chip", "gpu_cores", "quant", "variant", "batch_size")},
    "model": "model_sha256",
}


class SubmissionsView(SubmissionIngestMixin, ListAPIView[Submission]):
    serializer_class = serializers.SubmissionSerializer
    pagination_class = NewestFirst

    def get_throttles(self) -> list[BaseThrottle]:
        return [AddressThrottle()] if self.request.method == "POST" else [ReadThrottle()]

    def get_queryset(self) -> QuerySet[Submission]:
        queryset = Submission.objects.public().select_related("campaign", "contributor", "key", "machine", "model_file")
        return filters.apply(
            queryset, self.request.query_params, SUBMISSION_FILTERS, to_many=SUBMISSION_TO_MANY_FILTERS
        )

    @extend_schema(
        summary="List submissions, newest first (hidden ones are left out)",
        parameters=filters.parameters(*SUBMISSION_FILTERS),
    )
    def get(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        return super().get(request, *args, **kwargs)

    @extend_schema(
        operation_id="submit_result",
        summary="Submit a signed result",
        description=(
            "Body: a DSSE envelope of type application/vnd.benchhub.submission.v1+json signed by a registered "
            "key. 201 when stored, 200 with the same body when the identical envelope arrives again."
        ),
        request=serializers.EnvelopeSerializer,
        examples=[examples.SUBMISSION],
        responses={
            201: serializers.SubmissionCreatedSerializer,
            200: serializers.SubmissionCreatedSerializer,
            **ERRORS,
        },
    )
    def post(self, request: Request) -> Response:
        return self.create_submission(request)


class SubmissionDetailView(RetrieveAPIView[Submission]):
    serializer_class = serializers.SubmissionDetailSerializer
    queryset = Submission.objects.select_related(
        "campaign", "contributor", "key", "machine", "model_file"
    ).prefetch_related(
        "variants__correctness", "variants__generation", "measurements__campaign", "measurements__contributor"
    )


class EnvelopeView(APIView):
    @extend_schema(
        summary="The stored envelope, byte for byte", responses={(200, "application/json"): OpenApiTypes.BINARY}
    )
    def get(self, request: Request, pk: str) -> HttpResponse:
        submission = get_object_or_404(Submission.objects.select_related("raw"), pk=pk)
        return HttpResponse(bytes(submission.raw.body), content_type="application/json")


class LeaderboardView(APIView):
    throttle_classes = (ReadThrottle,)

    @extend_schema(
        summary="Leaderboard cells of a campaign",
        responses=serializers.LeaderboardSerializer,
        description=(
            "One row per cell (chip, gpu_cores, model file, backend, variant, commit, batch_size), docs/protocol.md "
            "section 7 (cells version 4): a submission's speedup is the median of its whole rotation cycles' ratios, "
            "with its own standard error; a machine is a registered key, its value its submissions combined; machines "
            "are combined as studies (random effects): speedup estimates the typical machine's ratio, tau the spread "
            "of true ratios between machines and i2 the share of the spread that is theirs, and tg_tps = "
            "baseline_tg_tps x speedup. interval names [ci_low, ci_high] in words, [predict_low, predict_high] is "
            "where one more machine running the campaign's default sweep is expected at predict_level, and verdict "
            "is judged against min_effect. Rows with control true ran on a backend the patches do not touch (an A/A "
            "control). Without `model`, the cells of every model of the campaign. "
            "While cells keep changing the board is served as last rendered for at most "
            "BENCHHUB_BOARD_MAX_STALENESS_SECONDS (2 by default), then rendered again."
        ),
        parameters=[
            OpenApiParameter("campaign", OpenApiTypes.STR, required=True, description="campaign slug"),
            *filters.parameters(*CELL_FILTERS),
        ],
    )
    def get(self, request: Request) -> HttpResponse:
        params = request.query_params
        filters.reject_unknown(params, {"campaign", "format", *CELL_FILTERS})
        slug = filters.text(params, "campaign")
        if not slug:
            raise ApiError(400, "missing_parameter", "The campaign parameter is required.", "campaign")
        campaign = Campaign.objects.filter(slug=slug).first()
        if campaign is None:
            raise filters.unknown_value("campaign", slug, sorted(Campaign.objects.values_list("slug", flat=True)))
        conditions = filters.recognised(params, CELL_FILTERS, filters.Known(campaign))
        cells = LeaderboardCell.objects.filter(campaign=campaign, **conditions)
        return HttpResponse(leaderboard_json(campaign, cells, conditions), content_type="application/json")


def leaderboard_json(campaign: Campaign, cells: QuerySet[LeaderboardCell], conditions: Mapping[str, Any]) -> bytes:
    """Thousands of rows per campaign: read as tuples, not model instances, rendered once per
    version of the cells and at most once per staleness bound while they keep changing (readcache),
    so the board is never more than the bound behind the cells and an unchanged one costs two small
    queries. Keyed by the recognised filter values in their stored spelling, never by raw text."""

    def render() -> bytes:
        ordered = cells.order_by("chip", "gpu_cores", "model_sha256", "backend", "batch_size", "variant", "commit")
        rows = board.api_rows(ordered)
        return JSONRenderer().render({"campaign": campaign.slug, "baseline": campaign.baseline, "rows": rows})

    return cached_render("leaderboard", (campaign.pk, sorted(conditions.items())), cells, render)


class CampaignListView(APIView):
    @extend_schema(
        operation_id="campaigns_list",
        summary="Campaigns, each as its manifest",
        responses=serializers.ManifestSerializer(many=True),
    )
    def get(self, request: Request) -> Response:
        return Response([manifest(campaign, request) for campaign in Campaign.objects.all()])


class CampaignDetailView(APIView):
    @extend_schema(
        operation_id="campaign_manifest",
        summary="The manifest an agent follows",
        responses=serializers.ManifestSerializer,
    )
    def get(self, request: Request, slug: str) -> Response:
        return Response(manifest(get_object_or_404(Campaign, slug=slug), request))


class CampaignVersionsView(APIView):
    @extend_schema(
        operation_id="campaign_versions",
        summary="Every version of a campaign, oldest first, with what each changed",
        responses=serializers.CampaignVersionSerializer(many=True),
    )
    def get(self, request: Request, slug: str) -> Response:
        campaign = get_object_or_404(Campaign, slug=slug)
        return Response([version_row(version) for version in campaign.versions.order_by("version")])


class PatchFileView(APIView):
    @extend_schema(
        summary="Download a patch file of a campaign", responses={(200, "text/x-patch"): OpenApiTypes.BINARY}
    )
    def get(self, request: Request, slug: str, name: str) -> FileResponse:
        campaign = get_object_or_404(Campaign, slug=slug)
        signed = {
            patch["sha256"]
            for version in campaign.versions.all()
            for variant in version.manifest["variants"]
            for patch in variant.get("patches", [])
            if patch["name"] == name
        }
        if not signed:
            raise ApiError(404, "not_found", f"{name} is not a patch of {slug}.")
        found = [campaigns.patch_file(name, sha256) for sha256 in sorted(signed)]
        patch = next((candidate for candidate in found if candidate.sha256), found[0])
        if patch.sha256 is None:
            raise ApiError(404, "patch_unavailable", patch.problem)
        return FileResponse(patch.path.open("rb"), content_type="text/x-patch", as_attachment=True, filename=name)


class MeasurementsView(ListAPIView[Measurement]):
    serializer_class = serializers.MeasurementSerializer
    pagination_class = ByIdDescending
    throttle_classes: tuple[type[BaseThrottle], ...] = (ReadThrottle,)

    def get_queryset(self) -> QuerySet[Measurement]:
        queryset = Measurement.objects.filter(submission__hidden=False, submission__withdrawn_at__isnull=True)
        queryset = queryset.select_related("campaign", "contributor")
        return filters.apply(queryset, self.request.query_params, MEASUREMENT_FILTERS)

    @extend_schema(
        summary="Per-submission measurements (hidden submissions left out)",
        parameters=filters.parameters(*MEASUREMENT_FILTERS),
    )
    def get(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        return super().get(request, *args, **kwargs)

    def list(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        """A page of up to 1000 rows as plain values: a serializer per row cost ~0.2 ms each, most
        of a 200-row page (the SQL is under a millisecond on the (chip, quant, -id) index)."""
        page = self.paginate_queryset(self.get_queryset().values("id", *MEASUREMENT_SOURCES))
        rows = [
            {column: row[source] for column, source in zip(MEASUREMENT_COLUMNS, MEASUREMENT_SOURCES, strict=True)}
            for row in page or []
        ]
        for row in rows:
            row["submission"] = str(row["submission"])
        return self.get_paginated_response(rows)


MEASUREMENT_COLUMNS = serializers.MeasurementSerializer.Meta.fields
# The ORM path of each column (the serializer's sources, read as plain values).
MEASUREMENT_SOURCES = tuple(
    {
        "submission": "submission_id",
        "campaign": "campaign__slug",
        "contributor": "contributor__handle",
        "variant": "variant_name",
    }.get(column, column)
    for column in MEASUREMENT_COLUMNS
)


class MeasurementsCsvView(MeasurementsView):
    throttle_classes = (ExportThrottle,)

    @extend_schema(
        summary="All matching measurements as CSV",
        description=(
            "The measurements' columns plus the model, the machine (its key's keyid: a machine is a key), the "
            "submission's date and demo flag, whether the variant's output was degenerate, and its own cell's "
            "verdict, interval words, min_effect and control flag; t/s rounded to 2 decimals (what "
            "llama-batched-bench prints), speedups to 4 (docs/api.md)."
        ),
        parameters=filters.parameters(*MEASUREMENT_FILTERS),
        responses={(200, "text/csv"): OpenApiTypes.STR},
    )
    def get(self, request: Request, *args: Any, **kwargs: Any) -> StreamingHttpResponse:  # type: ignore[override]
        queryset = csv_rows(self.get_queryset()).order_by("id").values_list(*CSV_SOURCES)

        def lines() -> Iterator[str]:
            # Tuples straight from a server-side cursor: memory stays flat however many rows match.
            writer = csv.writer(_Echo())
            yield writer.writerow(CSV_COLUMNS)
            count = 0
            for values in queryset.iterator(chunk_size=5000):
                count += 1
                yield writer.writerow(
                    [csv_value(column, value) for column, value in zip(CSV_COLUMNS, values, strict=True)]
                )
            # The last line says the export is whole: a body cut short (a worker killed, a proxy's
            # timeout, a dropped connection) lacks it, however it ends (docs/api.md, exports).
            yield csv_complete_line(count)

        response = StreamingHttpResponse(lines(), content_type="text/csv; charset=utf-8")
        response["Content-Disposition"] = 'attachment; filename="benchhub-measurements.csv"'
        return response


class _Echo:
    def write(self, value: str) -> str:
        return value


SNAPSHOT_PENDING = {
    503: OpenApiResponse(
        serializers.ErrorSerializer, "`snapshot_pending`: none is published yet; one is being written (Retry-After)"
    )
}
SNAPSHOT_HEADERS = [
    OpenApiParameter(name, str, OpenApiParameter.HEADER, description=text, response=[200])
    for name, text in (
        ("Repr-Digest", "RFC 9530: `sha-256=:<base64 of the body's SHA-256>:`"),
        ("X-Snapshot-Sha256", "the same digest in hex, as the index gives it"),
        ("X-Snapshot-Generated-At", "when it was written (ISO 8601); every submission received by then is in it"),
        ("ETag", "the quoted hex digest"),
    )
]


def published_snapshot() -> snapshot.Index | Response:
    """The latest snapshot's index, or the 503 that says one is coming (and queues its writing: in
    the embedded default the task runs in-process, and the snapshot is there at once)."""
    directory = Path(settings.BENCHHUB_SNAPSHOT_DIR)
    index = snapshot.latest(directory)
    if index is None:
        tasks.write_snapshot.delay(only_if_missing=True)
        index = snapshot.latest(directory)
    if index is None:
        retry = max(60, int(settings.BENCHHUB_SNAPSHOT_INTERVAL_SECONDS) // 60)
        body = error_body("snapshot_pending", "No snapshot is published yet; one is being written.", retry_after=retry)
        return Response(body, status=503, headers={"Retry-After": str(retry)})
    return index


class SnapshotView(APIView):
    throttle_classes = (ExportThrottle,)  # every raw envelope, gzipped: the heaviest read there is

    @extend_schema(
        summary="Every raw envelope, campaign, key and moderation decision, as gzipped JSON lines",
        description=(
            "The latest published snapshot file (written every BENCHHUB_SNAPSHOT_INTERVAL_SECONDS), with its "
            "digest: what scripts/recompute_cells.py verifies and recomputes every cell from (docs/recompute.md)."
        ),
        parameters=SNAPSHOT_HEADERS,
        responses={(200, "application/gzip"): OpenApiTypes.BINARY, **SNAPSHOT_PENDING},
    )
    def get(self, request: Request) -> HttpResponseBase:
        index = published_snapshot()
        if isinstance(index, Response):
            return index
        digest = bytes.fromhex(index["sha256"])
        headers = {
            "Content-Disposition": f'attachment; filename="{index["file"]}"',
            "Repr-Digest": f"sha-256=:{base64.b64encode(digest).decode()}:",
            "X-Snapshot-Sha256": index["sha256"],
            "X-Snapshot-Generated-At": index["generated_at"],
            "ETag": f'"{index["sha256"]}"',
            "Last-Modified": http_date(datetime.fromisoformat(index["generated_at"]).timestamp()),
        }
        if request.headers.get("If-None-Match") == headers["ETag"]:
            return HttpResponseNotModified(headers={"ETag": headers["ETag"]})
        if settings.BENCHHUB_SNAPSHOT_ACCEL_REDIRECT:  # nginx sends the file; the worker is free at once
            location = settings.BENCHHUB_SNAPSHOT_ACCEL_REDIRECT.rstrip("/") + "/" + index["file"]
            return HttpResponse(content_type="application/gzip", headers={**headers, "X-Accel-Redirect": location})
        # A FileResponse sets Content-Length; the file stays readable while it is open, even once a
        # newer one has replaced it and it was pruned.
        file = (Path(settings.BENCHHUB_SNAPSHOT_DIR) / index["file"]).open("rb")
        return FileResponse(file, content_type="application/gzip", headers=headers)


class SnapshotIndexView(APIView):
    throttle_classes = (ReadThrottle,)

    @extend_schema(
        summary="The latest snapshot's file name, sha256, size, time and number of submissions",
        responses={200: serializers.SnapshotIndexSerializer, **SNAPSHOT_PENDING},
    )
    def get(self, request: Request) -> Response:
        index = published_snapshot()
        return index if isinstance(index, Response) else Response(index)
