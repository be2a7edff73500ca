"""Query-string filters shared by the list endpoints and the leaderboard; a malformed or unknown
value is a 400 naming it."""

from __future__ import annotations

import difflib
from collections.abc import Collection, Mapping, Sequence
from functools import cached_property
from typing import Any, TypeVar

from django.db.models import Model, QuerySet
from django.utils.text import slugify
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter

from benchhub.accounts.models import Contributor
from benchhub.api.errors import ApiError
from benchhub.results.board import chip_slug
from benchhub.results.models import Campaign, CellGroup, LeaderboardCell, ModelFile
from benchhub.results.published import ReferenceRow

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


def _campaign_values(campaigns: QuerySet[Campaign], key: str) -> set[Any]:
    found: set[Any] = set()
    for definition in campaigns.values_list("definition", flat=True):
        found |= {variant["name"] for variant in definition["variants"]} if key == "variants" else set()
        found |= set(definition["sweep"]["batch_sizes"]) if key == "batch_sizes" else set()
    return found


class Known:
    """The filter values this service knows, for one campaign's board, for the lists, or for the
    published rows (issues 30 and 33): a value that matches none of them is a 400 naming the field
    and the value with the known ones (or the nearest), never an empty 200, and never a new cache
    entry. Read lazily, each a small DISTINCT over the cell groups, the cells or the model files."""

    def __init__(self, campaign: Campaign | None = None, references: bool = False) -> None:
        self.campaign = campaign
        self.references = references

    def _groups(self) -> QuerySet[CellGroup]:
        groups = CellGroup.objects.order_by()  # no default ordering's columns in the DISTINCT
        return groups.filter(campaign=self.campaign) if self.campaign else groups

    @cached_property
    def chips(self) -> set[tuple[str, int | None]]:
        found = set(self._groups().values_list("chip", "gpu_cores").distinct())
        if self.references:  # a crowd chip's binning slug selects its published rows too
            found |= set(ReferenceRow.objects.order_by().values_list("chip", "gpu_cores").distinct())
        return found

    def values(self, name: str) -> set[Any]:
        if name == "gpu_cores":
            return {cores for _, cores in self.chips if cores is not None}
        if name == "model":
            return set(self._groups().values_list("model_sha256", flat=True).distinct())
        if self.references:
            return set(ReferenceRow.objects.order_by().values_list(REFERENCE_FIELDS[name], flat=True).distinct())
        if name == "quant":
            return set(ModelFile.objects.order_by().values_list("file_type", flat=True).distinct())
        campaigns = Campaign.objects.filter(pk=self.campaign.pk) if self.campaign else Campaign.objects.all()
        if name == "campaign":
            return set(campaigns.values_list("slug", flat=True))
        if name == "variant":
            return _campaign_values(campaigns, "variants")
        if name == "batch_size":
            cells = LeaderboardCell.objects.order_by()
            cells = cells.filter(campaign=self.campaign) if self.campaign else cells
            return _campaign_values(campaigns, "batch_sizes") | set(
                cells.values_list("batch_size", flat=True).distinct()
            )
        if name == "contributor":
            return set()  # checked one at a time: the handles are too many to list
        raise KeyError(name)

    def chip(self, raw: str) -> dict[str, Any]:
        """A chip's name, or the slug its page has (apple-m4-pro-20c: one binning; apple-m4-pro: all)."""
        if any(chip == raw for chip, _ in self.chips):
            return {"chip": raw}
        for chip, cores in sorted(self.chips, key=repr):
            if chip_slug(chip, cores) == raw:
                return {"chip": chip, "gpu_cores": cores}
        names = sorted({chip for chip, _ in self.chips if slugify(chip) == raw})
        if len(names) == 1:
            return {"chip": names[0]}
        slugs = sorted(chip_slug(chip, cores) for chip, cores in self.chips)
        raise unknown_value("chip", raw, sorted({chip for chip, _ in self.chips}), also_near=slugs)

    def value(self, name: str, raw: str) -> Any:
        """The stored spelling of a recognised value; a 400 for any other."""
        if name in INTEGER_FILTERS:
            number = integer(name, raw)
            if number not in self.values(name):
                raise unknown_value(name, raw, sorted(self.values(name)))
            return number
        if name == "contributor":
            if not Contributor.objects.filter(handle__iexact=raw).exists():
                raise unknown_value(name, raw, [])
            return raw
        known = self.values(name)
        if name == "quant":  # any case; the stored spelling keeps the indexes usable
            found = next((quant for quant in sorted(known) if quant.lower() == raw.lower()), None)
        else:
            found = raw.lower() if name == "model" and raw.lower() in known else raw if raw in known else None
        if found is None:
            raise unknown_value(name, raw, sorted(known))
        return found


REFERENCE_FIELDS = {"campaign": "campaign_slug", "quant": "quant", "variant": "variant", "batch_size": "batch_size"}
LISTED_AT_MOST = 50


def unknown_value(name: str, raw: str, known: list[Any], also_near: Sequence[str] = ()) -> ApiError:
    """400 naming the field and the value, with the known values (or, past 50 of them, the
    nearest); `also_near` are other spellings a near match may be (a chip's slugs)."""
    extra: dict[str, Any] = {"value": raw}
    if len(known) <= LISTED_AT_MOST:
        extra["known"] = known
    by_folded = {text.casefold(): text for text in [*map(str, known), *also_near]}
    nearest = [by_folded[text] for text in difflib.get_close_matches(raw.casefold(), list(by_folded), n=3, cutoff=0.6)]
    if nearest:
        extra["did_you_mean"] = nearest
    hint = f" Did you mean {nearest[0]!r}?" if nearest else ""
    return ApiError(400, "unknown_value", f"No {name} {raw!r} is known here.{hint}", name, **extra)


def integer(name: str, raw: str) -> int:
    try:
        value = int(raw)
    except ValueError:
        raise ApiError(400, "invalid_filter", f"{name} must be an integer.", name) from None
    if not -BIGINT_LIMIT <= value < BIGINT_LIMIT:
        raise ApiError(400, "invalid_filter", f"{name} is out of range.", name)
    return value


def chip_conditions(raw: str, known: Known | None = None) -> dict[str, Any]:
    return (known or Known()).chip(raw)


def recognised(params: Mapping[str, str], lookups: Mapping[str, str], known: Known) -> dict[str, Any]:
    """The ORM conditions of the filters given, each value one the service knows, in its stored
    spelling (so a cache keyed by them holds only recognised values)."""
    conditions: dict[str, Any] = {}
    for name, lookup in lookups.items():
        raw = text(params, name)
        if raw is None or raw == "":
            continue
        if name == "chip" and lookup == "chip":
            conditions.update(known.chip(raw))
        else:
            conditions[lookup] = known.value(name, raw)
    return conditions


def apply(
    queryset: QuerySet[M],
    params: Mapping[str, str],
    lookups: Mapping[str, str],
    to_many: Collection[str] = (),
    also_known: Collection[str] = PAGINATION,
    known: Known | None = None,
) -> QuerySet[M]:
    """`lookups` maps a query parameter to the ORM lookup it filters on; any parameter neither a
    filter nor in `also_known` is a 400, and so is a value `known` does not hold. Only a filter
    named in `to_many` (one that joins a to-many relation) can repeat a row and needs DISTINCT,
    which at a million rows would sort every match before the first page."""
    reject_unknown(params, {*lookups, *also_known})
    conditions = recognised(params, lookups, known or Known())
    queryset = queryset.filter(**conditions) if conditions else queryset
    return queryset.distinct() if any(params.get(name) for name in to_many) else queryset
