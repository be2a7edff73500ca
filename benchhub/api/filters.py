"""Query-string filters shared by the list endpoints; a malformed value is a 400 naming it."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any, TypeVar

from django.db.models import Model, QuerySet
from django.utils.text import slugify
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter

from benchhub.api.errors import ApiError
from benchhub.results.models import LeaderboardCell
from benchhub.web.leaderboard import chip_slug

M = TypeVar("M", bound=Model)

INTEGER_FILTERS = {"gpu_cores", "batch_size"}
BIGINT_LIMIT = 2**63  # past a signed 64-bit integer: SQLite cannot bind it, PostgreSQL has no such id
PAGINATION = ("cursor", "page_size", "format")  # DRF's own query parameters

FILTER_HELP = {
    "campaign": "campaign slug",
    "chip": "chip name, exact (e.g. 'Apple M5 Pro'), or the site's slug of it (e.g. 'apple-m4-pro-20c')",
    "gpu_cores": "GPU core count",
    "quant": "the model's general.file_type name, any case (e.g. IQ2_XXS or iq2_xxs)",
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


def reject_unknown(params: Mapping[str, str], known: Collection[str]) -> None:
    """A misspelt filter would otherwise answer every row, as if it had matched."""
    for name in params:
        if name not in known:
            raise ApiError(
                400, "unknown_parameter", f"Unknown query parameter {name!r}; known: {', '.join(sorted(known))}.", name
            )


def _known_chips() -> set[tuple[str, int | None]]:
    # order_by(): a default ordering's columns would join the DISTINCT.
    return set(LeaderboardCell.objects.order_by().values_list("chip", "gpu_cores").distinct())


def chip_conditions(raw: str) -> dict[str, Any]:
    """A chip's name, or the slug its page has (apple-m4-pro-20c: one binning; apple-m4-pro: all)."""
    known = _known_chips()
    if any(chip == raw for chip, _ in known):
        return {"chip": raw}
    for chip, cores in known:
        if chip_slug(chip, cores) == raw:
            return {"chip": chip, "gpu_cores": cores}
    names = {chip for chip, _ in known if slugify(chip) == raw}
    return {"chip": names.pop()} if len(names) == 1 else {"chip": raw}


def canonical_quant(raw: str) -> str:
    """The stored spelling of a quant named in any case: an exact match keeps the indexes usable."""
    stored = LeaderboardCell.objects.order_by().values_list("quant", flat=True).distinct()
    return next((quant for quant in stored if quant.lower() == raw.lower()), raw)


def apply(
    queryset: QuerySet[M],
    params: Mapping[str, str],
    lookups: Mapping[str, str],
    to_many: Collection[str] = (),
    also_known: Collection[str] = PAGINATION,
) -> QuerySet[M]:
    """`lookups` maps a query parameter to the ORM lookup it filters on; any parameter neither a
    filter nor in `also_known` is a 400. Only a filter named in `to_many` (one that joins a to-many
    relation) can repeat a row and needs DISTINCT, which at a million rows would sort every match
    before the first page."""
    reject_unknown(params, {*lookups, *also_known})
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
            if not -BIGINT_LIMIT <= value < BIGINT_LIMIT:
                raise ApiError(400, "invalid_filter", f"{name} is out of range.", name)
        elif name == "quant":
            value = canonical_quant(raw)
        elif name == "chip" and lookup == "chip":
            conditions.update(chip_conditions(raw))
            continue
        conditions[lookup] = value
    queryset = queryset.filter(**conditions) if conditions else queryset
    return queryset.distinct() if any(params.get(name) for name in to_many) else queryset
