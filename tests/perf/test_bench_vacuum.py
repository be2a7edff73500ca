"""The bench's stand-in for autovacuum (bench/vacuum.py) vacuums a table by autovacuum's own rule
with the server's settings: a table past its dead-row threshold, not one under it, and not again
once vacuumed."""

from __future__ import annotations

import time

import psycopg
import pytest
from django.db import connection

from bench.vacuum import StandIn, vacuum_due

pytestmark = pytest.mark.django_db(transaction=True)  # the stand-in reads other sessions' statistics


def _dead_rows(database: psycopg.Connection[tuple[int]], table: str, at_least: int) -> None:
    """Wait for the statistics of this session's deletes (flushed within about a second)."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        row = database.execute("SELECT n_dead_tup FROM pg_stat_user_tables WHERE relname = %s", [table]).fetchone()
        if row and row[0] >= at_least:
            return
        time.sleep(0.2)
    raise AssertionError(f"{table}: the statistics never showed {at_least} dead rows")


def test_it_vacuums_a_table_past_the_dead_row_threshold_and_leaves_one_under_it() -> None:
    settings = connection.settings_dict
    url = f"postgres://{settings['USER']}@{settings['HOST']}:{settings['PORT']}/{settings['NAME']}"
    with psycopg.connect(url, autocommit=True) as database:
        for table, rows, deleted in (("vacuum_probe_many", 1000, 800), ("vacuum_probe_few", 40, 30)):
            database.execute(f"DROP TABLE IF EXISTS {table}")
            database.execute(f"CREATE TABLE {table} (id int)")
            database.execute(f"INSERT INTO {table} SELECT generate_series(1, {rows})")
            database.execute(f"ANALYZE {table}")  # its row count known, its inserts not due
            database.execute(f"DELETE FROM {table} WHERE id <= {deleted}")
        _dead_rows(database, "vacuum_probe_many", 800)
        _dead_rows(database, "vacuum_probe_few", 30)
        done = StandIn()
        vacuum_due(database, done)
        assert "vacuum_probe_many" in done.vacuums  # dead 800 > 50 + 0.2 x 1000; inserted 1000 < 1000 + 0.2 x 1000
        assert "vacuum_probe_few" not in done.vacuums  # 30 < 50 + 0.2 x 40
        (dead,) = database.execute(
            "SELECT n_dead_tup FROM pg_stat_user_tables WHERE relname = 'vacuum_probe_many'"
        ).fetchone() or (None,)
        assert dead == 0
        again = StandIn()
        vacuum_due(database, again)
        assert "vacuum_probe_many" not in again.vacuums
        database.execute("DROP TABLE vacuum_probe_many, vacuum_probe_few")
