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
from django.db import connection

from benchhub.accounts.models import PublicKey
from benchhub.results.models import Measurement, Submission

# The largest finite double: NaN and infinities fail `<=` it on PostgreSQL, and SQLite stores NaN as NULL.
_FINITE = "1.7976931348623157e308"
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


def _rows(group_filter: dict[str, Any], held: bool, on_probation_since: datetime | None) -> tuple[str, list[Any]]:
    """Every row of the group but the non-standard ones, with its reason (held applied), whether its
    key is on probation and whether the cell counts it."""
    held_sql = "s.model_held" if held else "FALSE"
    params: list[Any] = []
    pending_sql = "0"
    if on_probation_since is not None:
        pending_sql = (
            f"CASE WHEN m.key_id IN (SELECT id FROM {PublicKey._meta.db_table} WHERE created_at > %s) THEN 1 ELSE 0 END"
        )
        params.append(connection.ops.adapt_datetimefield_value(on_probation_since))
    gpu_cores_sql = "m.gpu_cores IS NULL" if group_filter["gpu_cores"] is None else "m.gpu_cores = %s"
    params += [group_filter["campaign_id"], group_filter["chip"]]
    params += [] if group_filter["gpu_cores"] is None else [group_filter["gpu_cores"]]
    params += [group_filter["model_sha256"], group_filter["backend"], Measurement.Excluded.NONSTANDARD]
    decided = ", ".join(f"'{reason}'" for reason in (Measurement.Excluded.HIDDEN, Measurement.Excluded.WITHDRAWN))
    sql = f"""
    group_rows AS (
        SELECT m.variant_name AS variant, m."commit" AS commit_, m.batch_size, m.key_id AS machine,
            m.contributor_id AS contributor, m.speedup, m.baseline_tg_tps AS baseline,
            m.submission_id AS submission, s.received_at,
            CASE WHEN m.excluded_reason IN ({decided}) THEN m.excluded_reason
                WHEN {held_sql} THEN '{Measurement.Excluded.HELD}' ELSE m.excluded_reason END AS reason,
            {pending_sql} AS pending
        FROM {Measurement._meta.db_table} m JOIN {Submission._meta.db_table} s ON s.id = m.submission_id
        WHERE m.campaign_id = %s AND m.chip = %s AND {gpu_cores_sql} AND m.model_sha256 = %s AND m.backend = %s
            AND m.excluded_reason <> %s
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
    ranked AS (
        SELECT variant, commit_, batch_size, machine, speedup, baseline,
            row_number() OVER (PARTITION BY variant, commit_, batch_size, machine ORDER BY speedup) AS speedup_rank,
            row_number() OVER (PARTITION BY variant, commit_, batch_size, machine ORDER BY baseline) AS baseline_rank,
            count(*) OVER (PARTITION BY variant, commit_, batch_size, machine) AS n
        FROM usable
    ),
    machines AS (
        SELECT variant, commit_, batch_size, machine,
            avg(CASE WHEN speedup_rank IN ((n + 1) / 2, (n + 2) / 2) THEN speedup END) AS value,
            avg(CASE WHEN baseline_rank IN ((n + 1) / 2, (n + 2) / 2) THEN baseline END) AS baseline
        FROM ranked GROUP BY variant, commit_, batch_size, machine
    )"""
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
    rows_sql, params = _rows(group_filter, held, on_probation_since)
    reasons = Measurement.COUNTED_EXCLUSIONS
    excluded_sql = ", ".join(
        f"sum(CASE WHEN reason = '{reason}' THEN 1 ELSE 0 END) AS excluded_{index}"
        for index, reason in enumerate(reasons)
    )
    cells_sql = f"""
    WITH {rows_sql},
    {_log_sums("cell_sums", "machines", _CELL)},
    counts AS (
        SELECT variant, commit_, batch_size, count(*) AS n_submissions, count(DISTINCT contributor) AS n_contributors
        FROM usable GROUP BY variant, commit_, batch_size
    ),
    tallies AS (
        SELECT variant, commit_, batch_size, {excluded_sql},
            count(DISTINCT CASE WHEN reason = '' AND pending = 1 THEN machine END) AS n_pending
        FROM tagged GROUP BY variant, commit_, batch_size
    ),
    names AS (
        SELECT variant, commit_, batch_size, submission FROM (
            SELECT variant, commit_, batch_size, submission, row_number() OVER (
                PARTITION BY variant, commit_, batch_size ORDER BY counted DESC, received_at, submission) AS r
            FROM tagged) AS ordered
        WHERE r = 1
    )
    SELECT t.variant, t.commit_, t.batch_size, {", ".join(f"t.excluded_{i}" for i in range(len(reasons)))},
        t.n_pending, names.submission, counts.n_submissions, counts.n_contributors,
        cell_sums.n, cell_sums.center, cell_sums.log_sum, cell_sums.log_square_sum, cell_sums.baseline
    FROM tallies t
    JOIN names ON {" AND ".join(f"names.{key} = t.{key}" for key in _CELL)}
    LEFT JOIN counts ON {" AND ".join(f"counts.{key} = t.{key}" for key in _CELL)}
    LEFT JOIN cell_sums ON {" AND ".join(f"cell_sums.{key} = t.{key}" for key in _CELL)}
    """
    cells: dict[stats.CellKey, stats.CellSummary] = {}
    tallies: dict[stats.CellKey, CellTally] = {}
    submission_field = Submission._meta.pk
    assert submission_field is not None
    with connection.cursor() as cursor:
        cursor.execute(cells_sql, params)
        for row in cursor.fetchall():
            variant, commit, batch_size = row[0], row[1], int(row[2])
            counted = row[3 : 3 + len(reasons)]
            n_pending, submission, n_submissions, n_contributors = row[3 + len(reasons) : 7 + len(reasons)]
            machine_sums, baseline = row[7 + len(reasons) : 11 + len(reasons)], row[11 + len(reasons)]
            key = (variant, commit, batch_size)
            cells[key] = stats.CellSummary(
                machines=_sums(machine_sums),
                baseline_tg_tps=None if baseline is None else float(baseline),
                n_submissions=int(n_submissions or 0),
                n_contributors=int(n_contributors or 0),
            )
            tallies[key] = CellTally(
                excluded={reason: int(count) for reason, count in zip(reasons, counted, strict=True)},
                n_pending=int(n_pending),
                named_by=submission_field.to_python(submission),
            )
        headlines: dict[stats.HeadlineKey, stats.LogSums | None] = dict.fromkeys(
            sorted({(variant, commit) for variant, commit, _ in cells})
        )
        sizes = sorted({int(size) for size in headline_sizes})
        if sizes and headlines:
            headline_sql = f"""
            WITH {rows_sql},
            headline_machines AS (
                SELECT variant, commit_, machine, exp(avg(ln(value))) AS value,
                    CAST(NULL AS DOUBLE PRECISION) AS baseline
                FROM machines WHERE batch_size IN ({", ".join(str(size) for size in sizes)})
                GROUP BY variant, commit_, machine HAVING count(*) = {len(sizes)}
            ),
            {_log_sums("headline_sums", "headline_machines", _HEADLINE)}
            SELECT variant, commit_, n, center, log_sum, log_square_sum FROM headline_sums
            """
            cursor.execute(headline_sql, params)
            for variant, commit, *sums in cursor.fetchall():
                headlines[(variant, commit)] = _sums(tuple(sums))
    return GroupSums(stats.PageSummary(cells, headlines), tallies)
