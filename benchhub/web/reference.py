"""Reading the published reference tables (benchhub/web/data/reference_rows.json) into
ReferenceRow: one validation rule set, used by the management command and its tests."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from django.db import transaction

from benchhub.results.published import ReferenceRow

DEFAULT_PATH = Path(__file__).resolve().parent / "data" / "reference_rows.json"
TEXT_FIELDS = ("campaign", "chip", "machine", "model", "quant", "baseline", "variant", "source")


class ReferenceFileError(ValueError):
    """The reference file cannot be loaded; the message is one sentence naming the place."""


@dataclass(frozen=True)
class LoadResult:
    created: int
    updated: int


def _text(table: dict[str, Any], key: str, where: str) -> str:
    value = table.get(key)
    if not isinstance(value, str) or not value.strip():
        raise ReferenceFileError(f"{where}: '{key}' must be a non-empty string.")
    return value


def _rows(table: dict[str, Any], where: str) -> list[tuple[int, float, float]]:
    rows = table.get("rows")
    if not isinstance(rows, list) or not rows:
        raise ReferenceFileError(f"{where}: 'rows' must be a non-empty list of [batch_size, baseline, patched].")
    parsed = []
    for index, row in enumerate(rows):
        ok = (
            isinstance(row, list)
            and len(row) == 3
            and isinstance(row[0], int)
            and not isinstance(row[0], bool)
            and row[0] >= 1
            and all(isinstance(v, int | float) and not isinstance(v, bool) and v > 0 for v in row[1:])
        )
        if not ok:
            raise ReferenceFileError(
                f"{where}: rows[{index}] must be [batch_size ≥ 1, baseline t/s > 0, patched t/s > 0]."
            )
        parsed.append((int(row[0]), float(row[1]), float(row[2])))
    return parsed


def _gpu_cores(table: dict[str, Any], where: str) -> int | None:
    cores = table.get("gpu_cores")
    if cores is not None and (not isinstance(cores, int) or isinstance(cores, bool) or cores < 1):
        raise ReferenceFileError(f"{where}: 'gpu_cores' must be a positive integer or null.")
    return cores


def read_tables(path: Path) -> list[dict[str, Any]]:
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except OSError as error:
        raise ReferenceFileError(f"cannot read {path}: {error.strerror}.") from error
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise ReferenceFileError(f"{path} is not valid JSON: {error}.") from error
    tables = document.get("tables") if isinstance(document, dict) else None
    if not isinstance(tables, list):
        raise ReferenceFileError(f"{path} must hold an object with a 'tables' list.")
    if not all(isinstance(table, dict) for table in tables):
        raise ReferenceFileError(f"{path}: every entry of 'tables' must be an object.")
    return tables


@transaction.atomic
def load_reference_rows(path: Path = DEFAULT_PATH) -> LoadResult:
    """Create or update every row of the file; all or nothing, safe to run again."""
    created = updated = 0
    for index, table in enumerate(read_tables(path)):
        where = f"tables[{index}]"
        text = {key: _text(table, key, where) for key in TEXT_FIELDS}
        cores = _gpu_cores(table, where)
        for batch_size, baseline_tps, tps in _rows(table, where):
            _, was_created = ReferenceRow.objects.update_or_create(
                campaign_slug=text["campaign"],
                machine_label=text["machine"],
                model_label=text["model"],
                variant=text["variant"],
                batch_size=batch_size,
                defaults={
                    "chip": text["chip"],
                    "gpu_cores": cores,
                    "quant": text["quant"],
                    "baseline_variant": text["baseline"],
                    "baseline_tg_tps": baseline_tps,
                    "tg_tps": tps,
                    "source": text["source"],
                    "source_url": str(table.get("source_url") or ""),
                    "method": str(table.get("method") or ""),
                },
            )
            created += was_created
            updated += not was_created
    return LoadResult(created=created, updated=updated)
