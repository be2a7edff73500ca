"""Number the cells that measurement rows name (models.CellKey): the one place a cell's name gets
its number, for every writer of measurements (the ingest and the rebuild by COPY, the ORM path on
SQLite, moderation). A name seen for the first time is numbered in the writer's transaction; two
writers numbering the same new name at once wait on the unique constraint and both read the one
row that commits.

Takes any DB-API cursor whose placeholders are `%s`: psycopg's own (bulk.py writes with COPY on
it) or Django's (which translates them for SQLite).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from benchhub.results.models import CellKey

# campaign id, chip, GPU cores, quant, variant, batch size: what the measurement row names them by
CellName = tuple[int, str, int | None, str, str, int]
GROUP_COLUMNS = ("campaign_id", "chip", "gpu_cores", "quant")
NAME_COLUMNS = (*GROUP_COLUMNS, "variant_name", "batch_size")

_TABLE = CellKey._meta.db_table
# Coalesce as in the unique constraint: gpu_cores is null off Apple GPUs.
_READ = (
    f"SELECT variant, batch_size, id FROM {_TABLE} "
    "WHERE campaign_id = %s AND chip = %s AND COALESCE(gpu_cores, -1) = %s AND quant = %s"
)
_CREATE = (
    f"INSERT INTO {_TABLE} (campaign_id, chip, gpu_cores, quant, variant, batch_size) "
    "VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT DO NOTHING"
)


def name_of(row: dict[str, Any]) -> CellName:
    """The cell a measurement row (measurements.measurement_fields) falls in."""
    return tuple(row[column] for column in NAME_COLUMNS)


def numbers(cursor: Any, names: Iterable[CellName]) -> dict[CellName, int]:
    """The number of each cell named, numbering the new ones."""
    wanted = set(names)
    found = _read(cursor, {name[:4] for name in wanted})
    missing = sorted(wanted - found.keys(), key=lambda name: (*name[:2], -1 if name[2] is None else name[2], *name[3:]))
    if missing:
        cursor.executemany(_CREATE, missing)
        found = _read(cursor, {name[:4] for name in wanted})
    return found


def number_rows(cursor: Any, rows: list[dict[str, Any]]) -> None:
    """Set `cell_key_id` in each measurement row."""
    known = numbers(cursor, (name_of(row) for row in rows))
    for row in rows:
        row["cell_key_id"] = known[name_of(row)]


def _read(cursor: Any, groups: set[tuple[Any, ...]]) -> dict[CellName, int]:
    found: dict[CellName, int] = {}
    for campaign_id, chip, gpu_cores, quant in groups:
        cursor.execute(_READ, [campaign_id, chip, -1 if gpu_cores is None else gpu_cores, quant])
        for variant, batch_size, number in cursor.fetchall():
            found[(campaign_id, chip, gpu_cores, quant, variant, batch_size)] = number
    return found
