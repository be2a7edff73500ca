"""Issue 6 target 5: bytes per stored submission, split into the raw envelope, the normalised rows
and their indexes (PostgreSQL's own relation sizes, after VACUUM ANALYZE)."""

from __future__ import annotations

from typing import Any

import psycopg

from bench.figures import report

PER_SUBMISSION_TABLES = (
    "results_submission",
    "results_rawenvelope",
    "results_submissionvariant",
    "results_sweeprun",
    "results_sweeprow",
    "results_correctnesscheck",
    "results_generationcheck",
    "results_measurement",
)
# Derived per cell, not per submission: a band grows with the square root of its cell's values.
PER_CELL_TABLES = ("results_leaderboardcell", "results_cellband", "results_cellkey")
SIZES = """
SELECT c.relname, pg_relation_size(c.oid), pg_indexes_size(c.oid),
       pg_total_relation_size(c.oid) - pg_relation_size(c.oid) - pg_indexes_size(c.oid),
       c.reltuples::bigint
FROM pg_class c WHERE c.relkind = 'r' AND c.relname = ANY(%s)
"""

INDEX_SIZES = """
SELECT relname, indexrelname, pg_relation_size(indexrelid) FROM pg_stat_user_indexes
WHERE relname = ANY(%s) ORDER BY 3 DESC
"""


def run(database_url: str) -> None:
    with psycopg.connect(database_url, autocommit=True) as connection:
        connection.execute("VACUUM ANALYZE")
        count = connection.execute("SELECT count(*) FROM results_submission").fetchone()[0]  # type: ignore[index]
        rows: list[Any] = connection.execute(SIZES, [list(PER_SUBMISSION_TABLES)]).fetchall()
        index_sizes: list[Any] = connection.execute(INDEX_SIZES, [list(PER_SUBMISSION_TABLES)]).fetchall()
        per_cell: list[Any] = connection.execute(SIZES, [list(PER_CELL_TABLES)]).fetchall()
        envelope_bytes = connection.execute("SELECT avg(octet_length(body)) FROM results_rawenvelope").fetchone()[0]  # type: ignore[index]
    if not count:
        return
    lines = [f"{count} stored submissions; average envelope {float(envelope_bytes):.0f} bytes as received"]
    totals = {"heap": 0, "indexes": 0, "toast": 0}
    for name, heap, indexes, toast, tuples in sorted(rows, key=lambda row: -(row[1] + row[2] + row[3])):
        lines.append(
            f"{name:28s} {tuples / count:6.1f} rows/submission  heap {heap / count:7.0f} B  "
            f"toast {toast / count:7.0f} B  indexes {indexes / count:7.0f} B"
        )
        totals["heap"] += heap
        totals["indexes"] += indexes
        totals["toast"] += toast
    raw = next(row for row in rows if row[0] == "results_rawenvelope")
    raw_total = raw[1] + raw[2] + raw[3]
    everything = sum(totals.values())
    normalised = totals["heap"] + totals["toast"] - raw[1] - raw[3]
    lines.append(
        f"per submission: {everything / count:.0f} B in all = raw envelope {raw_total / count:.0f} B (heap+toast, "
        f"compressed by PostgreSQL) + normalised rows {normalised / count:.0f} B"
        f" + their indexes {(totals['indexes'] - raw[2]) / count:.0f} B"
    )
    lines.append("indexes of 100 B or more per submission:")
    lines += [
        f"  {table + '.' + index:68s} {size / count:7.0f} B ({size / 2**20:.0f} MiB)"
        for table, index, size in index_sizes
        if size >= 100 * count
    ]
    lines.append("per cell (not counted above):")
    lines += [
        f"  {name:28s} {tuples:10d} rows  {(heap + indexes + toast) / 2**20:7.1f} MiB with indexes "
        f"({(heap + indexes + toast) / count:.0f} B a submission)"
        for name, heap, indexes, toast, tuples in per_cell
    ]
    report("storage (issue 6 target 5)", lines)
