"""Incremental refreshes: the submissions waiting for a group merged into its stored cells.

A cell keeps, per column, the elements at the ranks its statistics need (stats.OrderState). The
waiting submissions' rows are read, then each tracked element is stepped to its new rank: the steps
go through the added rows (in Python) and through a few stored neighbours of the element, read
from the partial indexes on each cell's included values (models.Measurement), all in one
statement. Stored rows are those of refreshed submissions only; every waiting one is left out in
the same statement, so a submission that commits while a refresh runs is never stepped over as
if stored, and is taken in by the next refresh. The work grows with the rows added, not with the
cell's history. PostgreSQL only (unnest, LATERAL); cells.py reads a group in full elsewhere.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from uuid import UUID

from django.db import connection

from benchhub.results import stats
from benchhub.results.models import Measurement

if TYPE_CHECKING:
    from benchhub.results.cells import Group

# (variant, batch size) within a group
CellName = tuple[str, int]


def ranked_key(submission_id: UUID | str) -> str:
    """The tie-breaking key of stats.Ranked: the canonical text of the submission's UUID, whose
    order is PostgreSQL's order of the uuid column."""
    return str(submission_id if isinstance(submission_id, UUID) else UUID(submission_id))


@dataclass
class CellTotals:
    """What a cell knows besides its statistics' elements."""

    n: int = 0
    n_contributors: int = 0
    n_excluded_correctness: int = 0
    n_excluded_degenerate: int = 0


Cell = tuple[CellTotals, stats.OrderState]


@dataclass
class Added:
    """The waiting submissions' rows of one cell."""

    columns: dict[str, list[stats.Ranked]] = field(default_factory=lambda: {column: [] for column in stats.COLUMNS})
    contributors: set[int] = field(default_factory=set)
    n_correctness: int = 0
    n_degenerate: int = 0


def _read_added(group: Group, waiting: list[Any]) -> dict[CellName, Added]:
    added: dict[CellName, Added] = {}
    rows = (
        Measurement.objects.filter(submission__in=waiting, **group.filter())
        .exclude(excluded_reason=Measurement.Excluded.HIDDEN)
        .values_list("submission_id", "variant_name", "batch_size", *stats.COLUMNS, "contributor_id", "excluded_reason")
    )
    for key, variant, batch_size, tg_tps, baseline_tg_tps, speedup, contributor, excluded in rows:
        cell = added.setdefault((variant, batch_size), Added())
        if excluded == Measurement.Excluded.CORRECTNESS_FAILED:
            cell.n_correctness += 1
        elif excluded == Measurement.Excluded.DEGENERATE_OUTPUT:
            cell.n_degenerate += 1
        elif excluded == Measurement.Excluded.NONE and speedup is not None and baseline_tg_tps is not None:
            for column, value in zip(stats.COLUMNS, (tg_tps, baseline_tg_tps, speedup), strict=True):
                cell.columns[column].append((value, ranked_key(key)))
            cell.contributors.add(contributor)
    for cell in added.values():
        for values in cell.columns.values():
            values.sort()
    return added


class _StoredRows:
    """Reads of a group's stored rows for an incremental refresh: only rows of refreshed
    submissions (every waiting one is left out, in the same statement), through the partial
    indexes on each cell's included values (models.Measurement)."""

    def __init__(self, group: Group) -> None:
        waiting_sql, waiting_params = group.waiting_submissions().values("pk").query.sql_with_params()
        self.prefix = f"WITH waiting AS MATERIALIZED ({waiting_sql}) "
        self.params: list[Any] = [*waiting_params]
        gpu = "m.gpu_cores IS NULL" if group.gpu_cores is None else "m.gpu_cores = %s"
        self.where = (
            f"m.campaign_id = %s AND m.chip = %s AND {gpu} AND m.quant = %s "
            "AND m.variant_name = q.variant AND m.batch_size = q.batch_size "
            "AND m.excluded_reason = '' AND m.speedup IS NOT NULL AND m.baseline_tg_tps IS NOT NULL "
            "AND m.submission_id NOT IN (SELECT * FROM waiting)"
        )
        self.where_params = [group.campaign_id, group.chip, *([] if group.gpu_cores is None else [group.gpu_cores])]
        self.where_params.append(group.quant)
        self.table = Measurement._meta.db_table

    def neighbours(self, requests: list[tuple[CellName, str, stats.Move]]) -> list[list[stats.Ranked]]:
        """For each (cell, column, move): up to |steps| stored elements next to the move's start in
        its direction, nearest first. One statement for all of them."""
        found: list[list[stats.Ranked]] = [[] for _ in requests]
        if not requests:
            return found
        parts, params = [], list(self.params)
        for column in stats.COLUMNS:
            for forward in (True, False):
                chosen = [
                    (index, name, move)
                    for index, (name, of, move) in enumerate(requests)
                    if of == column and (move.steps > 0) == forward
                ]
                if not chosen:
                    continue
                order = "ASC" if forward else "DESC"
                parts.append(
                    "SELECT q.i, x.value, x.submission_id FROM unnest(%s::int[], %s::text[], %s::int[], %s::float8[], "
                    "%s::uuid[], %s::int[]) AS q(i, variant, batch_size, value, submission, k) CROSS JOIN LATERAL ("
                    f"SELECT m.{column} AS value, m.submission_id FROM {self.table} m WHERE {self.where} "
                    f"AND (m.{column}, m.submission_id) {'>' if forward else '<'} (q.value, q.submission) "
                    f"ORDER BY m.{column} {order}, m.submission_id {order} LIMIT q.k) AS x"
                )
                params += [
                    [index for index, _, _ in chosen],
                    [name[0] for _, name, _ in chosen],
                    [name[1] for _, name, _ in chosen],
                    [move.start[0] for _, _, move in chosen],
                    [move.start[1] for _, _, move in chosen],
                    [abs(move.steps) for _, _, move in chosen],
                    *self.where_params,
                ]
        with connection.cursor() as cursor:
            cursor.execute(self.prefix + " UNION ALL ".join(parts), params)
            for index, value, key in cursor.fetchall():
                found[index].append((value, ranked_key(key)))
        for (_, _, move), elements in zip(requests, found, strict=True):
            elements.sort(reverse=move.steps < 0)
        return found

    def all_present(self, elements: list[tuple[CellName, str, stats.Ranked]]) -> bool:
        """Whether every (cell, column, element) is a stored included row: the tracked elements an
        incremental refresh starts from must be (a rebuild that changed values, a crash, a manual
        edit would leave them pointing at nothing)."""
        parts, params = [], list(self.params)
        for column in stats.COLUMNS:
            chosen = [(name, element) for name, of, element in elements if of == column]
            if not chosen:
                continue
            parts.append(
                "SELECT count(*) FROM unnest(%s::text[], %s::int[], %s::float8[], %s::uuid[]) "
                f"AS q(variant, batch_size, value, submission) WHERE NOT EXISTS (SELECT 1 FROM {self.table} m "
                f"WHERE {self.where} AND m.{column} = q.value AND m.submission_id = q.submission)"
            )
            params += [
                [name[0] for name, _ in chosen],
                [name[1] for name, _ in chosen],
                [element[0] for _, element in chosen],
                [element[1] for _, element in chosen],
                *self.where_params,
            ]
        if not parts:
            return True
        with connection.cursor() as cursor:
            cursor.execute(self.prefix + " UNION ALL ".join(parts), params)
            return not any(missing for (missing,) in cursor.fetchall())

    def known_contributors(self, pairs: list[tuple[CellName, int]]) -> set[tuple[CellName, int]]:
        """The (cell, contributor) pairs that already have a stored included row in the cell."""
        if not pairs:
            return set()
        sql = (
            f"{self.prefix}SELECT q.i FROM unnest(%s::int[], %s::text[], %s::int[], %s::bigint[]) "
            f"AS q(i, variant, batch_size, contributor) WHERE EXISTS (SELECT 1 FROM {self.table} m "
            f"WHERE {self.where} AND m.contributor_id = q.contributor)"
        )
        params = [
            *self.params,
            list(range(len(pairs))),
            [name[0] for name, _ in pairs],
            [name[1] for name, _ in pairs],
            [contributor for _, contributor in pairs],
            *self.where_params,
        ]
        with connection.cursor() as cursor:
            cursor.execute(sql, params)
            return {pairs[index] for (index,) in cursor.fetchall()}


def merged(group: Group, stored: dict[CellName, Cell], waiting: list[Any]) -> dict[CellName, Cell]:
    """The stored cells with the waiting submissions' rows merged in (raises stats.StaleState
    when the stored elements are not where the state says)."""
    added = _read_added(group, waiting)
    rows = _StoredRows(group)
    empty: Cell = (CellTotals(), {})
    planned: dict[tuple[CellName, str], list[stats.Move | stats.Ranked]] = {}
    requests: list[tuple[CellName, str, stats.Move]] = []
    for name, cell in added.items():
        totals, state = stored.get(name, empty)
        for column, values in cell.columns.items():
            if not values:
                continue
            planned[(name, column)] = steps = stats.moves(totals.n, state.get(column, []), column, values)
            requests += [(name, column, move) for move in steps if isinstance(move, stats.Move)]
    tracked = [
        (name, column, element)
        for name in added
        for column, elements in stored.get(name, empty)[1].items()
        for element in elements
    ]
    if not rows.all_present(tracked):
        raise stats.StaleState(f"a tracked element of {group} is not among its stored rows")
    neighbours = iter(rows.neighbours(requests))
    new_contributors = [(name, contributor) for name, cell in added.items() for contributor in cell.contributors]
    known = rows.known_contributors([pair for pair in new_contributors if stored.get(pair[0], empty)[0].n])
    merged = dict(stored)
    for name, cell in added.items():
        totals, state = stored.get(name, empty)
        n_added = len(cell.columns["speedup"])
        new_state = dict(state)
        for column, values in cell.columns.items():
            if values:
                new_state[column] = [
                    stats.resolve(step, next(neighbours), values) if isinstance(step, stats.Move) else step
                    for step in planned[(name, column)]
                ]
        merged[name] = (
            CellTotals(
                totals.n + n_added,
                totals.n_contributors + sum((name, c) not in known for c in cell.contributors),
                totals.n_excluded_correctness + cell.n_correctness,
                totals.n_excluded_degenerate + cell.n_degenerate,
            ),
            new_state,
        )
    return merged
