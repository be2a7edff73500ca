"""Number the cells that measurement rows name (models.CellKey): the one place a cell's name gets
its number, for every writer of measurements (the ingest and the rebuild by COPY, the ORM path on
SQLite, moderation). A name seen for the first time is numbered in the writer's transaction; two
writers numbering the same new name at once wait on the unique constraint and both read the one
row that commits.

Takes any DB-API cursor whose placeholders are `%s`: psycopg's own (bulk.py writes with COPY on
it) or Django's (which translates them for SQLite).
"""

from __future__ import annotations

import operator
from collections.abc import Iterable
from typing import Any

from benchhub.results.models import CellKey

# campaign id, chip, GPU cores, quant, variant, batch size: what the measurement row names them by
CellName = tuple[int, str, int | None, str, str, int]
GROUP_COLUMNS = ("campaign_id", "chip", "gpu_cores", "quant")
NAME_COLUMNS = (*GROUP_COLUMNS, "variant_name", "batch_size")

_TABLE = CellKey._meta.db_table
# The numbers of every cell of some groups, in one statement (a chunk of a rebuild names hundreds
# of groups). Coalesce as in the unique constraint: gpu_cores is null off Apple GPUs.
_READ = (
    "WITH wanted (campaign_id, chip, gpu_cores, quant) AS (VALUES {groups}) "
    f"SELECT k.campaign_id, k.chip, k.gpu_cores, k.quant, k.variant, k.batch_size, k.id FROM {_TABLE} k "
    "JOIN wanted w ON k.campaign_id = w.campaign_id AND k.chip = w.chip "
    "AND COALESCE(k.gpu_cores, -1) = w.gpu_cores AND k.quant = w.quant"
)
_CREATE = (
    f"INSERT INTO {_TABLE} (campaign_id, chip, gpu_cores, quant, variant, batch_size) "
    "VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT DO NOTHING"
)


_NAME_OF = operator.itemgetter(*NAME_COLUMNS)


def name_of(row: dict[str, Any]) -> CellName:
    """The cell a measurement row (measurements.measurement_fields) falls in."""
    name: CellName = _NAME_OF(row)
    return name


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
    names = [name_of(row) for row in rows]
    known = numbers(cursor, names)
    for row, name in zip(rows, names, strict=True):
        row["cell_key_id"] = known[name]


def _read(cursor: Any, groups: set[tuple[Any, ...]]) -> dict[CellName, int]:
    if not groups:
        return {}
    params = [
        value
        for campaign_id, chip, gpu_cores, quant in groups
        for value in (campaign_id, chip, -1 if gpu_cores is None else gpu_cores, quant)
    ]
    cursor.execute(_READ.format(groups=", ".join(["(%s, %s, %s, %s)"] * len(groups))), params)
    return {tuple(name): number for *name, number in cursor.fetchall()}
