"""Which relations a round's page traffic went to, per accepted submission: blocks read from outside
shared_buffers and found in them (pg_statio_user_tables and _indexes), and full-page images written
to the WAL (pg_walinspect, where the server has it). What grows with the stored history shows here:
an index whose inserts land at random places reads and rewrites more of its pages as it grows."""

from __future__ import annotations

import re
import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import psycopg

# A backend flushes its statistics at most once a second, and an idle one within about a second.
STATS_FLUSH_S = 1.5

STATIO_SQL = """
SELECT relname, heap_blks_read, heap_blks_hit FROM pg_statio_user_tables
UNION ALL
SELECT relname || ' (TOAST)', coalesce(toast_blks_read, 0) + coalesce(tidx_blks_read, 0),
       coalesce(toast_blks_hit, 0) + coalesce(tidx_blks_hit, 0)
FROM pg_statio_user_tables WHERE toast_blks_read IS NOT NULL
UNION ALL
SELECT indexrelname, idx_blks_read, idx_blks_hit FROM pg_statio_user_indexes
"""

# The relation a WAL block reference names, by its file: a TOAST table and its index go by their
# owner's name, as pg_statio_user_tables counts them.
FILENODE_SQL = """
SELECT pg_relation_filenode(c.oid), coalesce(owner.relname || ' (TOAST)', c.relname)
FROM pg_class c
JOIN pg_namespace n ON n.oid = c.relnamespace
LEFT JOIN pg_index i ON i.indexrelid = c.oid
LEFT JOIN pg_class owner ON owner.reltoastrelid IN (c.oid, i.indrelid)
WHERE n.nspname IN ('public', 'pg_toast') AND pg_relation_filenode(c.oid) IS NOT NULL
"""

# pg_walinspect's block_ref: "blkref #0: rel 1663/16384/16390 fork main blk 5 (FPW); hole: ...".
FULL_PAGE_IMAGE = re.compile(r"rel \d+/(\d+)/(\d+) fork \w+ blk \d+ \(FPW\)")


@dataclass(frozen=True)
class RelationTraffic:
    """Pages by relation over one round: read, hit and full-page images (None: not measurable)."""

    read: dict[str, int]
    hit: dict[str, int]
    full_page_images: dict[str, int] | None


@dataclass(frozen=True)
class RelationCounters:
    read: dict[str, int]
    hit: dict[str, int]
    wal_lsn: str
    walinspect: bool

    @classmethod
    def now(cls, database_url: str) -> RelationCounters:
        time.sleep(STATS_FLUSH_S)
        with psycopg.connect(database_url, autocommit=True) as connection:
            rows = connection.execute(STATIO_SQL).fetchall()
            walinspect = _walinspect_ready(connection)
            lsn = str(connection.execute("SELECT pg_current_wal_lsn()").fetchone()[0])  # type: ignore[index]
        return cls(
            {name: int(read) for name, read, _ in rows}, {name: int(hit) for name, _, hit in rows}, lsn, walinspect
        )

    def since(self, before: RelationCounters, database_url: str) -> RelationTraffic:
        return RelationTraffic(
            _grown(self.read, before.read),
            _grown(self.hit, before.hit),
            full_page_images(database_url, before.wal_lsn, self.wal_lsn) if before.walinspect else None,
        )


def _grown(after: dict[str, int], before: dict[str, int]) -> dict[str, int]:
    return {name: count - before.get(name, 0) for name, count in after.items() if count > before.get(name, 0)}


def _walinspect_ready(connection: psycopg.Connection[Any]) -> bool:
    """pg_walinspect in this database, created on first use where the server ships it."""
    try:
        connection.execute("CREATE EXTENSION IF NOT EXISTS pg_walinspect")
    except psycopg.Error:
        return False
    return True


def full_page_images(database_url: str, since_lsn: str, until_lsn: str) -> dict[str, int] | None:
    """Full-page images written between two WAL positions to this database's relations, by relation;
    None where the WAL of the range is gone (recycled after a checkpoint) or cannot be read."""
    try:
        with psycopg.connect(database_url, autocommit=True) as connection:
            database_oid = str(
                connection.execute("SELECT oid FROM pg_database WHERE datname = current_database()").fetchone()[0]  # type: ignore[index]
            )
            names = {str(filenode): name for filenode, name in connection.execute(FILENODE_SQL)}
            counts: dict[str, int] = {}
            records = connection.execute(
                "SELECT block_ref FROM pg_get_wal_records_info(%s, %s) WHERE fpi_length > 0", [since_lsn, until_lsn]
            )
            for (block_ref,) in records:
                for database, filenode in FULL_PAGE_IMAGE.findall(block_ref):
                    if database == database_oid:
                        name = names.get(filenode, f"filenode {filenode}")
                        counts[name] = counts.get(name, 0) + 1
    except psycopg.Error:
        return None
    return counts


def traffic_lines(title: str, rounds: Sequence[tuple[RelationTraffic, int]], top: int = 10) -> list[str]:
    """The relations with the most blocks read and full-page images per accepted submission (medians
    over the rounds), each with its blocks hit."""

    def median_of(field: str, name: str) -> float | None:
        known = [
            counts.get(name, 0) / max(accepted, 1)
            for traffic, accepted in rounds
            if (counts := getattr(traffic, field)) is not None
        ]
        return statistics.median(known) if known else None

    names = {name for traffic, _ in rounds for name in (*traffic.read, *traffic.hit)}
    medians = {name: [median_of(field, name) for field in ("read", "hit", "full_page_images")] for name in names}
    ranked = sorted(names, key=lambda name: (-((medians[name][0] or 0) + (medians[name][2] or 0)), name))
    lines = [f"{title}, pages per accepted submission (median of {len(rounds)} rounds): read | hit | full-page images"]
    for name in ranked[:top]:
        read, hit, images = medians[name]
        shown_images = "n/a" if images is None else f"{images:.2f}"
        lines.append(f"  {name:<44}{read or 0:8.2f} | {hit or 0:8.2f} | {shown_images}")
    return lines
