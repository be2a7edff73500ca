"""A stand-in for autovacuum where the server runs without it. This machine's PostgreSQL has
`autovacuum = off` (a CI setting, /etc/postgresql/15/main/conf.d/90-ci.conf); every deployment's
default, docker-compose.yml's included, has it on. Without it nothing is ever vacuumed: dead rows
(the bands a full read rewrites, the cells' old versions) stay in the heap and in every index, no
page becomes all-visible, so index-only scans visit the heap too, and the planner's row counts go
stale. Measured that way, a state looks worse the longer it has lived, which no server would show.

The stand-in applies autovacuum's own rule with the server's own settings, every naptime (and once
at the start, for what autovacuum would have done while the state sat): VACUUM a table once its
dead rows pass threshold + scale factor × its rows, or its rows inserted since its last vacuum pass
the insert threshold + insert scale factor × its rows; ANALYZE it once its rows changed since its
last analyze pass the analyze threshold + scale factor × its rows. It runs with autovacuum's cost
delay and limit, one table at a time, on a connection of its own, and counts what it did."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import psycopg

SETTINGS = (
    "autovacuum",
    "autovacuum_naptime",
    "autovacuum_vacuum_threshold",
    "autovacuum_vacuum_scale_factor",
    "autovacuum_vacuum_insert_threshold",
    "autovacuum_vacuum_insert_scale_factor",
    "autovacuum_analyze_threshold",
    "autovacuum_analyze_scale_factor",
    "autovacuum_vacuum_cost_delay",
    "autovacuum_vacuum_cost_limit",
    "vacuum_cost_limit",
)

# The tables past autovacuum's thresholds, with the server's settings (pg_settings: naptime in
# seconds, cost delay in milliseconds). reltuples is -1 for a table never vacuumed nor analyzed.
DUE_SQL = """
WITH s AS (SELECT name, setting::float8 AS value FROM pg_settings WHERE vartype IN ('integer', 'real'))
SELECT c.oid::regclass::text,
       t.n_dead_tup > (SELECT value FROM s WHERE name = 'autovacuum_vacuum_threshold')
                      + (SELECT value FROM s WHERE name = 'autovacuum_vacuum_scale_factor') * greatest(c.reltuples, 0)
       OR t.n_ins_since_vacuum > (SELECT value FROM s WHERE name = 'autovacuum_vacuum_insert_threshold')
                      + (SELECT value FROM s WHERE name = 'autovacuum_vacuum_insert_scale_factor')
                        * greatest(c.reltuples, 0),
       t.n_mod_since_analyze > (SELECT value FROM s WHERE name = 'autovacuum_analyze_threshold')
                      + (SELECT value FROM s WHERE name = 'autovacuum_analyze_scale_factor') * greatest(c.reltuples, 0)
FROM pg_stat_user_tables t JOIN pg_class c ON c.oid = t.relid
ORDER BY t.n_dead_tup DESC
"""


@dataclass
class StandIn:
    """What the stand-in did during a run (None: the server's own autovacuum runs)."""

    vacuums: list[str] = field(default_factory=list)
    analyzes: list[str] = field(default_factory=list)
    seconds: float = 0.0

    def line(self) -> str:
        return (
            f"autovacuum is off on this server: the bench's stand-in (its rule and settings, bench/vacuum.py) "
            f"ran {len(self.vacuums)} VACUUM and {len(self.analyzes)} ANALYZE ({self.seconds:.0f} s)"
        )


def server_autovacuum(database_url: str) -> bool:
    with psycopg.connect(database_url, autocommit=True) as connection:
        return connection.execute("SHOW autovacuum").fetchone() == ("on",)


def _cost_settings(connection: psycopg.Connection[Any]) -> None:
    """VACUUM by hand runs unthrottled; autovacuum with its own delay and limit."""
    rows = connection.execute("SELECT name, setting FROM pg_settings WHERE name = ANY(%s)", [list(SETTINGS)])
    shown = {str(name): str(setting) for name, setting in rows}
    limit = shown["autovacuum_vacuum_cost_limit"]
    connection.execute(f"SET vacuum_cost_limit = {shown['vacuum_cost_limit'] if limit == '-1' else limit}")
    connection.execute(f"SET vacuum_cost_delay = {float(shown['autovacuum_vacuum_cost_delay'])}")


def vacuum_due(connection: psycopg.Connection[Any], done: StandIn) -> None:
    """One pass of autovacuum's rule over this database's tables."""
    started = time.perf_counter()
    for table, vacuum, analyze in connection.execute(DUE_SQL).fetchall():
        if vacuum:
            connection.execute(f"VACUUM {'(ANALYZE) ' if analyze else ''}{table}")
            done.vacuums.append(str(table))
        if analyze:
            if not vacuum:
                connection.execute(f"ANALYZE {table}")
            done.analyzes.append(str(table))
    done.seconds += time.perf_counter() - started


@contextmanager
def autovacuum_stand_in(database_url: str) -> Iterator[StandIn | None]:
    """Around a measured run: nothing where the server vacuums by itself; else the stand-in, once at
    first and then every naptime in a thread until the run ends (an ongoing VACUUM is let finish)."""
    if server_autovacuum(database_url):
        yield None
        return
    done = StandIn()
    stop = threading.Event()
    with psycopg.connect(database_url, autocommit=True) as connection:
        _cost_settings(connection)
        (naptime,) = connection.execute(
            "SELECT setting::float8 FROM pg_settings WHERE name = 'autovacuum_naptime'"
        ).fetchone() or (60.0,)
        vacuum_due(connection, done)

        def keep_vacuuming() -> None:
            while not stop.wait(float(naptime)):
                vacuum_due(connection, done)

        worker = threading.Thread(target=keep_vacuuming, name="autovacuum stand-in", daemon=True)
        worker.start()
        try:
            yield done
        finally:
            stop.set()
            worker.join()
