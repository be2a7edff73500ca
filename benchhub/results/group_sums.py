"""A group's measurements reduced in the database, in SQL that PostgreSQL and SQLite both run: what
cells.compute_cells needs of each cell, read in one pass over the group's rows.

The database tallies what stats does not judge (the excluded rows by reason, the machines on
probation, the submission that names the cell) and hands back the counted rows, each submission's
estimate over whole cycles with its standard error: on PostgreSQL one row a cell, each number a
column as an array (read in binary: no Python object a row), on SQLite a row each.
benchhub_protocol.stats then summarises those columns, machine by machine, with the same code that
summarises the simulation's and the recompute script's rows (tests/server/test_group_sums.py checks
the two agree).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

import psycopg
from benchhub_protocol import stats
from django.db import connection, transaction

from benchhub.accounts.models import PublicKey
from benchhub.results.models import Measurement, Submission

# The largest finite double: NaN and infinities fail `<=` it on PostgreSQL, and SQLite stores NaN as NULL.
_FINITE = "1.7976931348623157e308"
WORK_MEM = "64MB"
_CELL = ("variant", "commit_", "batch_size")
_NUMBERS = ("machine", "contributor", "speedup", "baseline", "log_se", "se_df", "n_cycles")


@dataclass(frozen=True)
class CellTally:
    """What a cell shows besides its statistics."""

    excluded: dict[str, int]
    n_pending: int
    named_by: Any  # the submission whose model claim names the cell


@dataclass(frozen=True)
class GroupSums:
    page: stats.PageSummary
    tallies: dict[stats.CellKey, CellTally]


def _in_group(alias: str, group_filter: dict[str, Any]) -> tuple[str, list[Any]]:
    """WHERE conditions putting `alias`'s rows in the group, and their parameters."""
    names = ("campaign_id", "chip", "gpu_cores", "model_sha256", "backend", "campaign_version")
    conditions = [f"{alias}.{name} IS NULL" if group_filter[name] is None else f"{alias}.{name} = %s" for name in names]
    return " AND ".join(conditions), [group_filter[name] for name in names if group_filter[name] is not None]


def _statement(
    group_filter: dict[str, Any], held: bool, on_probation_since: datetime | None, arrays: bool
) -> tuple[str, list[Any]]:
    """One statement: a row per cell ('cell': its tallies, and with `arrays` (PostgreSQL) its counted
    rows' numbers, a column an array, gathered in the same pass); without arrays, a row per counted
    row ('row': its numbers) besides."""
    params: list[Any] = []
    pending_sql = "0"
    if on_probation_since is not None:
        pending_sql = (
            f"CASE WHEN m.key_id IN (SELECT id FROM {PublicKey._meta.db_table} WHERE created_at > %s) THEN 1 ELSE 0 END"
        )
        params.append(connection.ops.adapt_datetimefield_value(on_probation_since))
    measurement_in_group, measurement_params = _in_group("m", group_filter)
    # The submissions' side too, so that their index is used however many others there are.
    submission_in_group, submission_params = _in_group("s", group_filter)
    params += [*measurement_params, *submission_params, Measurement.Excluded.NONSTANDARD]
    decided = ", ".join(f"'{reason}'" for reason in (Measurement.Excluded.HIDDEN, Measurement.Excluded.WITHDRAWN))
    reasons = Measurement.COUNTED_EXCLUSIONS
    excluded_sql = ", ".join(
        f"sum(CASE WHEN reason = '{reason}' THEN 1 ELSE 0 END) AS excluded_{index}"
        for index, reason in enumerate(reasons)
    )
    cell = ", ".join(_CELL)

    def on_cell(left: str, right: str) -> str:
        return " AND ".join(f"{left}.{key} = {right}.{key}" for key in _CELL)

    finite = (
        f"speedup > 0 AND speedup <= {_FINITE} AND baseline > 0 AND baseline <= {_FINITE}"
        f" AND log_se >= 0 AND log_se <= {_FINITE}"
    )
    usable = "counted = 1 AND usable = 1"
    if arrays:  # a column a number, one row a cell: no Python object a row
        gathered = "".join(f", array_agg({name}) FILTER (WHERE {usable}) AS {name}s" for name in _NUMBERS)
        numbers = ", ".join(f"t.{name}s" for name in _NUMBERS)
        rows = ""
    else:
        gathered = ""
        numbers = ", ".join("NULL" for _ in _NUMBERS)
        no_tallies = ", ".join("NULL" for _ in reasons)
        rows = f"""UNION ALL
    SELECT 'row', {cell}, {no_tallies}, NULL, NULL, {", ".join(_NUMBERS)} FROM tagged WHERE {usable}"""
    sql = f"""
    WITH group_rows AS (
        SELECT m.variant_name AS variant, m."commit" AS commit_, m.batch_size, COALESCE(m.key_id, 0) AS machine,
            m.contributor_id AS contributor, m.speedup, m.baseline_tg_tps AS baseline,
            m.log_se, m.se_df, m.n_cycles, m.submission_id AS submission, s.received_at,
            CASE WHEN m.excluded_reason IN ({decided}) THEN m.excluded_reason
                WHEN {"s.model_held" if held else "FALSE"} THEN '{Measurement.Excluded.HELD}'
                ELSE m.excluded_reason END AS reason,
            {pending_sql} AS pending
        FROM {Measurement._meta.db_table} m JOIN {Submission._meta.db_table} s ON s.id = m.submission_id
        WHERE {measurement_in_group} AND {submission_in_group} AND m.excluded_reason <> %s
    ),
    tagged AS (
        SELECT group_rows.*, CASE WHEN reason = '' AND pending = 0 AND speedup IS NOT NULL
            AND baseline IS NOT NULL AND log_se IS NOT NULL THEN 1 ELSE 0 END AS counted,
            CASE WHEN {finite} THEN 1 ELSE 0 END AS usable
        FROM group_rows
    ),
    pending AS (
        SELECT {cell}, count(*) AS n_pending
        FROM (SELECT DISTINCT {cell}, machine FROM tagged WHERE reason = '' AND pending = 1) AS found
        GROUP BY {cell}
    ),
    tallies AS (
        SELECT {cell}, {excluded_sql}, min(CASE WHEN counted = 1 THEN received_at END) AS counted_at,
            min(received_at) AS any_at{gathered}
        FROM tagged GROUP BY {cell}
    ),
    names AS (
        SELECT {", ".join(f"t.{key}" for key in _CELL)}, min(CAST(t.submission AS TEXT)) AS submission
        FROM tagged t JOIN tallies c ON {on_cell("t", "c")}
        WHERE t.received_at = COALESCE(c.counted_at, c.any_at) AND (c.counted_at IS NULL OR t.counted = 1)
        GROUP BY {", ".join(f"t.{key}" for key in _CELL)}
    )
    SELECT 'cell', {", ".join(f"t.{key}" for key in _CELL)},
        {", ".join(f"t.excluded_{index}" for index in range(len(reasons)))}, pending.n_pending, names.submission,
        {numbers}
    FROM tallies t
    JOIN names ON {on_cell("names", "t")}
    LEFT JOIN pending ON {on_cell("pending", "t")}
    {rows}
    """
    return sql, params


def group_sums(
    group_filter: dict[str, Any], *, held: bool, on_probation_since: datetime | None, headline_sizes: list[int]
) -> GroupSums:
    """The group's cells and headlines reduced (`held`: whether submissions' model_held holds them;
    `on_probation_since`: keys created after it are on probation, None for no probation)."""
    arrays = connection.vendor == "postgresql"
    sql, params = _statement(group_filter, held, on_probation_since, arrays)
    reasons = Measurement.COUNTED_EXCLUSIONS
    columns: dict[stats.CellKey, stats.Columns] = {}
    rows: dict[stats.CellKey, list[tuple[Any, ...]]] = {}
    tallies: dict[stats.CellKey, CellTally] = {}
    submission_field = Submission._meta.pk
    assert submission_field is not None
    with transaction.atomic(savepoint=False), connection.cursor() as cursor:
        if arrays:
            # The planner cannot estimate the CASE-derived filters (it guesses a row where there are
            # thousands) and picks nested loops or merge joins on sorted text keys; every join and
            # aggregate here can hash, with no sort of the group's rows. Those misestimates also cost the
            # plan past jit_above_cost, and compiling it took longer than running it (docs/performance.md,
            # section 4). All last to the end of the transaction. The arrays come back in binary:
            # psycopg reads them into lists in C.
            # One statement (set_config(..., true) is SET LOCAL): a refresh of a small group is round trips.
            settings = {"enable_nestloop": "off", "enable_mergejoin": "off", "enable_sort": "off", "jit": "off"}
            settings["work_mem"] = WORK_MEM
            cursor.execute(
                "SELECT " + ", ".join("set_config(%s, %s, true)" for _ in settings),
                [value for pair in settings.items() for value in pair],
            )
            with psycopg.Cursor(connection.connection) as raw:  # Django's are client-side: text only
                raw.execute(sql, params, binary=True)
                found = raw.fetchall()
        else:
            cursor.execute(sql, params)
            found = cursor.fetchall()
        for kind, variant, commit, batch_size, *rest in found:
            key = (variant, commit, int(batch_size))
            counted, rest = rest[: len(reasons)], rest[len(reasons) :]
            n_pending, submission, *numbers = rest
            if kind == "row":
                machine, contributor, speedup, baseline, log_se, df, n_cycles = numbers
                numbers = [machine, contributor, float(speedup), float(baseline), float(log_se), int(df), int(n_cycles)]
                rows.setdefault(key, []).append(tuple(numbers))
            else:
                if arrays:  # no counted row gives NULL arrays
                    columns[key] = stats.Columns(*(values or [] for values in numbers))
                tallies[key] = CellTally(
                    excluded={reason: int(count) for reason, count in zip(reasons, counted, strict=True)},
                    n_pending=int(n_pending or 0),
                    named_by=submission_field.to_python(submission),
                )
    for key, found_rows in rows.items():  # SQLite: a row each, as columns
        columns[key] = stats.Columns(*(list(column) for column in zip(*found_rows, strict=True)))
    empty = stats.Columns([], [], [], [], [], [], [])
    cells = {key: columns.get(key, empty) for key in tallies}
    return GroupSums(stats.summarise_columns(cells, headline_sizes=headline_sizes), tallies)
