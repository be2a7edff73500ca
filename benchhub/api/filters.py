"""Query-string filters shared by the list endpoints; a malformed value is a 400 naming it."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any, TypeVar

from django.db.models import Model, QuerySet
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter

from benchhub.api.errors import ApiError

M = TypeVar("M", bound=Model)

INTEGER_FILTERS = {"gpu_cores", "batch_size"}

FILTER_HELP = {
    "campaign": "campaign slug",
    "chip": "chip name, exact (e.g. 'Apple M5 Pro')",
    "gpu_cores": "GPU core count",
    "quant": "the model's general.file_type name (e.g. IQ2_XXS)",
    "model": "the model file's sha256",
    "variant": "variant name (e.g. 01)",
    "batch_size": "decode batch size",
    "contributor": "contributor handle (case-insensitive)",
}


def parameters(*names: str) -> list[OpenApiParameter]:
    return [
        OpenApiParameter(
            name, OpenApiTypes.INT if name in INTEGER_FILTERS else OpenApiTypes.STR, description=FILTER_HELP[name]
        )
        for name in names
    ]


def text(params: Mapping[str, str], name: str) -> str | None:
    """A query parameter PostgreSQL can compare: its text cannot hold NUL (without this, a 500)."""
    raw = params.get(name)
    if raw is not None and "\x00" in raw:
        raise ApiError(400, "invalid_filter", f"{name} must not contain NUL characters.", name)
    return raw


def apply(
    queryset: QuerySet[M], params: Mapping[str, str], lookups: Mapping[str, str], to_many: Collection[str] = ()
) -> QuerySet[M]:
    """`lookups` maps a query parameter to the ORM lookup it filters on. Only a filter named in
    `to_many` (one that joins a to-many relation) can repeat a row and needs DISTINCT, which at a
    million rows would sort every match before the first page."""
    conditions: dict[str, Any] = {}
    for name, lookup in lookups.items():
        raw = text(params, name)
        if raw is None or raw == "":
            continue
        value: Any = raw
        if name in INTEGER_FILTERS:
            try:
                value = int(raw)
            except ValueError:
                raise ApiError(400, "invalid_filter", f"{name} must be an integer.", name) from None
        conditions[lookup] = value
    queryset = queryset.filter(**conditions) if conditions else queryset
    return queryset.distinct() if any(params.get(name) for name in to_many) else queryset
