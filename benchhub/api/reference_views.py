"""`GET /api/v1/reference-rows/`: the published rows the pages show beside crowd cells."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from drf_spectacular.utils import extend_schema
from rest_framework.generics import ListAPIView
from rest_framework.request import Request
from rest_framework.response import Response

from benchhub.api import filters, serializers
from benchhub.results.published import ReferenceRow

REFERENCE_FILTERS = {"campaign": "campaign_slug", "chip": "chip", "quant": "quant", "variant": "variant"}
OTHER_FILTERS = {name: lookup for name, lookup in REFERENCE_FILTERS.items() if name != "chip"}


class ReferenceRowsView(ListAPIView[ReferenceRow]):
    serializer_class = serializers.ReferenceRowSerializer
    pagination_class = None  # tens of rows: the published tables, whole

    def get_queryset(self) -> QuerySet[ReferenceRow]:
        params = self.request.query_params
        rows = ReferenceRow.objects.all()
        known = filters.Known(references=True)
        chip = filters.text(params, "chip")
        if chip:
            # A published row that did not state its GPU cores belongs to every binning of its chip.
            found = filters.chip_conditions(chip, known)
            rows = rows.for_chip(found["chip"], found["gpu_cores"]) if "gpu_cores" in found else rows.filter(**found)
        return filters.apply(rows, params, OTHER_FILTERS, also_known=("chip", "format"), known=known)

    @extend_schema(
        summary="Published reference rows (not signed, never part of any cell)",
        description="The patch authors' published tables, one row per machine, model, variant and batch size.",
        parameters=filters.parameters(*REFERENCE_FILTERS),
    )
    def get(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        return super().get(request, *args, **kwargs)
