"""The measurements CSV: the JSON list's columns plus what a spreadsheet needs beside them (the
model, the machine (its key: a machine is a key, as in every count of machines), the date, demo,
degenerate output, and its cell's verdict, interval words, threshold and control flag), with floats
rounded to what was measured."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.db.models import Exists, F, OuterRef, QuerySet, Subquery, Value
from django.db.models.functions import Coalesce, NullIf

from benchhub.api import serializers
from benchhub.results.models import GenerationCheck, LeaderboardCell, Measurement

# llama-batched-bench prints t/s with 2 decimals; a speedup is a ratio of two such numbers of ~10-300 t/s,
# good to about 1e-4. More digits would be float noise (66.33500000000001).
DECIMALS = {"tg_tps": 2, "baseline_tg_tps": 2, "speedup": 4}

_MEASUREMENT_SOURCES = {
    "submission": "submission_id",
    "campaign": "campaign__slug",
    "contributor": "contributor__handle",
    "variant": "variant_name",
    "machine": "key__keyid",
}
_EXTRA = (
    "model",
    "machine",
    "received_at",
    "demo",
    "degenerate",
    "verdict",
    "interval",
    "min_effect",
    "control",
    "campaign_version",
    "superseded",
)
CSV_COLUMNS: tuple[str, ...] = (*serializers.MeasurementSerializer.Meta.fields, *_EXTRA)
CSV_SOURCES: tuple[str, ...] = tuple(_MEASUREMENT_SOURCES.get(column, column) for column in CSV_COLUMNS)


def csv_rows(measurements: QuerySet[Measurement]) -> QuerySet[Measurement]:
    """The extra columns as annotations: one query, streamed; the cell's verdict through its unique key."""
    # gpu_cores is null off Apple GPUs, and NULL = NULL is not true: compared as the cells' key does.
    cell = LeaderboardCell.objects.annotate(cores=Coalesce("gpu_cores", -1)).filter(
        campaign=OuterRef("campaign"),
        chip=OuterRef("chip"),
        cores=Coalesce(OuterRef("gpu_cores"), Value(-1)),
        model_sha256=OuterRef("model_sha256"),
        backend=OuterRef("backend"),
        variant=OuterRef("variant_name"),
        commit=OuterRef("commit"),
        batch_size=OuterRef("batch_size"),
        campaign_version=OuterRef("campaign_version"),
    )
    return measurements.annotate(
        model=Coalesce(NullIf(F("submission__model_file__label"), Value("")), F("submission__model_file__file_name")),
        received_at=F("submission__received_at"),
        demo=F("submission__is_demo"),
        degenerate=Exists(GenerationCheck.objects.filter(variant=OuterRef("variant"), degenerate=True)),
        verdict=Subquery(cell.values("verdict")[:1]),
        interval=Subquery(cell.values("interval")[:1]),
        min_effect=Subquery(cell.values("min_effect")[:1]),
        control=Subquery(cell.values("control")[:1]),
        superseded=Subquery(cell.values("superseded")[:1]),
    )


# A cell a spreadsheet would read as a formula (OWASP, CSV injection): `=HYPERLINK(...)`, `+...`,
# `-...`, `@...`, or one behind a tab or carriage return.
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def csv_value(column: str, value: Any) -> Any:
    if isinstance(value, str):
        # Contributor text (chip, model, handle...): a leading ' makes a spreadsheet show it as text.
        return "'" + value if value.startswith(FORMULA_STARTS) else value
    if value is None:
        return ""
    if column in DECIMALS:
        return f"{value:.{DECIMALS[column]}f}"
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, bool):
        return "true" if value else "false"
    return value


CSV_COMPLETE = "# complete: {rows} rows"


def csv_complete_line(rows: int) -> str:
    """The CSV's last line: a client checks that the body ends with it and that it counts the data
    rows it read (pandas: comment="#" skips it)."""
    return CSV_COMPLETE.format(rows=rows) + "\r\n"
