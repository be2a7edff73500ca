"""A group's measurements reduced in the database, in SQL that PostgreSQL and SQLite (>= 3.35, with
its math functions) both run: what cells.compute_cells needs of each cell and headline, a few
numbers each, instead of every row. benchhub_protocol.stats.judge_page judges the result, as it
judges stats.summarise_page's reduction of the same rows in Python (tests/server/test_group_sums.py
checks the two agree).

Per cell (variant, commit, batch size), over its counted rows with positive, finite numbers: per
machine (signing key) the median of its speedups and of its baselines; then the machines' count,
median, sum and sum of squares of log(value / median), and the geometric mean of their baselines.
Per (variant, commit) the same over the machines with a value at every headline size, a machine's
value being the geometric mean of those. Beside them, what stats does not judge: the excluded rows
by reason, the machines on probation, and the submission that names the cell.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from benchhub_protocol import stats
from django.db import connection, transaction

from benchhub.accounts.models import PublicKey
from benchhub.results.models import Measurement, Submission

# The largest finite double: NaN and infinities fail `<=` it on PostgreSQL, and SQLite stores NaN as NULL.
_FINITE = "1.7976931348623157e308"
WORK_MEM = "64MB"
_CELL = ("variant", "commit_", "batch_size")
_HEADLINE = ("variant", "commit_")


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
    group_filter: dict[str, Any], held: bool, on_probation_since: datetime | None, headline_sizes: list[int]
) -> tuple[str, list[Any]]:
    """One statement: a row per cell ('cell') and per headline with machines ('headline')."""
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
    sizes = sorted({int(size) for size in headline_sizes})
    in_headline = f"batch_size IN ({', '.join(str(size) for size in sizes)})" if sizes else "1 = 0"
    cell = ", ".join(_CELL)

    def on_cell(left: str, right: str, keys: tuple[str, ...] = _CELL) -> str:
        return " AND ".join(f"{left}.{key} = {right}.{key}" for key in keys)

    sql = f"""
    WITH group_rows AS (
        SELECT m.variant_name AS variant, m."commit" AS commit_, m.batch_size, COALESCE(m.key_id, 0) AS machine,
            m.contributor_id AS contributor, m.speedup, m.baseline_tg_tps AS baseline,
            m.submission_id AS submission, s.received_at,
            CASE WHEN m.excluded_reason IN ({decided}) THEN m.excluded_reason
                WHEN {"s.model_held" if held else "FALSE"} THEN '{Measurement.Excluded.HELD}'
                ELSE m.excluded_reason END AS reason,
            {pending_sql} AS pending
        FROM {Measurement._meta.db_table} m JOIN {Submission._meta.db_table} s ON s.id = m.submission_id
        WHERE {measurement_in_group} AND {submission_in_group} AND m.excluded_reason <> %s
    ),
    tagged AS (
        SELECT group_rows.*, CASE WHEN reason = '' AND pending = 0 AND speedup IS NOT NULL
            AND baseline IS NOT NULL THEN 1 ELSE 0 END AS counted
        FROM group_rows
    ),
    usable AS (
        SELECT * FROM tagged WHERE counted = 1 AND speedup > 0 AND speedup <= {_FINITE}
            AND baseline > 0 AND baseline <= {_FINITE}
    ),
    machine_rows AS (
        SELECT {cell}, machine, count(*) AS n, (min(speedup) + max(speedup)) / 2 AS middle_speedup,
            (min(baseline) + max(baseline)) / 2 AS middle_baseline
        FROM usable GROUP BY {cell}, machine
    ),
    ranked AS (
        SELECT {", ".join(f"u.{key}" for key in _CELL)}, u.machine, u.speedup, u.baseline, c.n,
            row_number() OVER (PARTITION BY {", ".join(f"u.{key}" for key in _CELL)}, u.machine
                ORDER BY u.speedup) AS speedup_rank,
            row_number() OVER (PARTITION BY {", ".join(f"u.{key}" for key in _CELL)}, u.machine
                ORDER BY u.baseline) AS baseline_rank
        FROM usable u JOIN machine_rows c ON {on_cell("u", "c", (*_CELL, "machine"))} AND c.n > 2
    ),
    machines AS (
        SELECT {cell}, machine, middle_speedup AS value, middle_baseline AS baseline
        FROM machine_rows WHERE n <= 2
        UNION ALL
        SELECT {cell}, machine, avg(CASE WHEN speedup_rank IN ((n + 1) / 2, (n + 2) / 2) THEN speedup END),
            avg(CASE WHEN baseline_rank IN ((n + 1) / 2, (n + 2) / 2) THEN baseline END)
        FROM ranked GROUP BY {cell}, machine, n
    ),
    {_log_sums("cell_sums", "machines", _CELL)},
    counts AS (
        SELECT {cell}, sum(n) AS n_submissions FROM machine_rows GROUP BY {cell}
    ),
    contributors AS (
        SELECT {cell}, count(*) AS n_contributors FROM (SELECT DISTINCT {cell}, contributor FROM usable) AS found
        GROUP BY {cell}
    ),
    pending AS (
        SELECT {cell}, count(*) AS n_pending
        FROM (SELECT DISTINCT {cell}, machine FROM tagged WHERE reason = '' AND pending = 1) AS found
        GROUP BY {cell}
    ),
    tallies AS (
        SELECT {cell}, {excluded_sql}, min(CASE WHEN counted = 1 THEN received_at END) AS counted_at,
            min(received_at) AS any_at
        FROM tagged GROUP BY {cell}
    ),
    names AS (
        SELECT {", ".join(f"t.{key}" for key in _CELL)}, min(CAST(t.submission AS TEXT)) AS submission
        FROM tagged t JOIN tallies c ON {on_cell("t", "c")}
        WHERE t.received_at = COALESCE(c.counted_at, c.any_at) AND (c.counted_at IS NULL OR t.counted = 1)
        GROUP BY {", ".join(f"t.{key}" for key in _CELL)}
    ),
    headline_machines AS (
        SELECT {", ".join(_HEADLINE)}, machine, exp(avg(ln(value))) AS value, CAST(NULL AS DOUBLE PRECISION) AS baseline
        FROM machines WHERE {in_headline}
        GROUP BY {", ".join(_HEADLINE)}, machine HAVING count(*) = {len(sizes)}
    ),
    {_log_sums("headline_sums", "headline_machines", _HEADLINE)}
    SELECT 'cell', {", ".join(f"t.{key}" for key in _CELL)},
        {", ".join(f"t.excluded_{index}" for index in range(len(reasons)))}, pending.n_pending, names.submission,
        counts.n_submissions, contributors.n_contributors,
        cell_sums.n, cell_sums.center, cell_sums.log_sum, cell_sums.log_square_sum, cell_sums.baseline
    FROM tallies t
    JOIN names ON {on_cell("names", "t")}
    LEFT JOIN pending ON {on_cell("pending", "t")}
    LEFT JOIN counts ON {on_cell("counts", "t")}
    LEFT JOIN contributors ON {on_cell("contributors", "t")}
    LEFT JOIN cell_sums ON {on_cell("cell_sums", "t")}
    UNION ALL
    SELECT 'headline', variant, commit_, NULL, {", ".join("NULL" for _ in reasons)}, NULL, NULL, NULL, NULL,
        n, center, log_sum, log_square_sum, NULL
    FROM headline_sums
    """
    return sql, params


def _log_sums(name: str, source: str, keys: tuple[str, ...]) -> str:
    """CTEs `name`_ranked, `name`_centers and `name`: per `keys`, the LogSums of `source`'s values
    (and the geometric mean of its baselines, where it has them)."""
    columns = ", ".join(keys)
    joined = " AND ".join(f"v.{key} = c.{key}" for key in keys)
    return f"""
    {name}_ranked AS (
        SELECT {columns}, value,
            row_number() OVER (PARTITION BY {columns} ORDER BY value) AS r,
            count(*) OVER (PARTITION BY {columns}) AS n
        FROM {source}
    ),
    {name}_centers AS (
        SELECT {columns}, n, avg(CASE WHEN r IN ((n + 1) / 2, (n + 2) / 2) THEN value END) AS center
        FROM {name}_ranked GROUP BY {columns}, n
    ),
    {name} AS (
        SELECT {", ".join(f"c.{key}" for key in keys)}, c.n, c.center,
            sum(ln(v.value / c.center)) AS log_sum,
            sum(ln(v.value / c.center) * ln(v.value / c.center)) AS log_square_sum,
            exp(avg(ln(v.baseline))) AS baseline
        FROM {name}_centers c JOIN {source} v ON {joined}
        GROUP BY {", ".join(f"c.{key}" for key in keys)}, c.n, c.center
    )"""


def _sums(row: tuple[Any, ...]) -> stats.LogSums | None:
    n, center, log_sum, log_square_sum = row
    return None if not n else stats.LogSums(int(n), float(center), float(log_sum), float(log_square_sum))


def group_sums(
    group_filter: dict[str, Any], *, held: bool, on_probation_since: datetime | None, headline_sizes: list[int]
) -> GroupSums:
    """The group's cells and headlines reduced (`held`: whether submissions' model_held holds them;
    `on_probation_since`: keys created after it are on probation, None for no probation)."""
    sql, params = _statement(group_filter, held, on_probation_since, headline_sizes)
    reasons = Measurement.COUNTED_EXCLUSIONS
    cells: dict[stats.CellKey, stats.CellSummary] = {}
    tallies: dict[stats.CellKey, CellTally] = {}
    found_headlines: dict[stats.HeadlineKey, stats.LogSums | None] = {}
    submission_field = Submission._meta.pk
    assert submission_field is not None
    with transaction.atomic(), connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            # The planner cannot estimate the CASE-derived filters (it guesses a row where there are
            # thousands) and picks nested loops (minutes on a group of 10,000 machines) or merge joins
            # on sorted text keys (half of a 6,700-row group's time); every join here is an equi-join it
            # can hash. Sorts of a large group's rows stay in memory. All last to the end of the transaction.
            cursor.execute("SET LOCAL enable_nestloop = off")
            cursor.execute("SET LOCAL enable_mergejoin = off")
            cursor.execute(f"SET LOCAL work_mem = '{WORK_MEM}'")
        cursor.execute(sql, params)
        for kind, variant, commit, batch_size, *rest in cursor.fetchall():
            counted, rest = rest[: len(reasons)], rest[len(reasons) :]
            n_pending, submission, n_submissions, n_contributors, *machine_sums, baseline = rest
            if kind == "headline":
                found_headlines[(variant, commit)] = _sums(tuple(machine_sums))
                continue
            key = (variant, commit, int(batch_size))
            cells[key] = stats.CellSummary(
                machines=_sums(tuple(machine_sums)),
                baseline_tg_tps=None if baseline is None else float(baseline),
                n_submissions=int(n_submissions or 0),
                n_contributors=int(n_contributors or 0),
            )
            tallies[key] = CellTally(
                excluded={reason: int(count) for reason, count in zip(reasons, counted, strict=True)},
                n_pending=int(n_pending or 0),
                named_by=submission_field.to_python(submission),
            )
    headlines = {
        pair: found_headlines.get(pair) for pair in sorted({(variant, commit) for variant, commit, _ in cells})
    }
    return GroupSums(stats.PageSummary(cells, headlines), tallies)
