"""Incremental refreshes: the submissions waiting for a group merged into its stored cells.

A cell keeps, per column, the elements at the ranks its statistics need (stats.OrderState), and a
band of the column's order around them whose every element is stored in CellBand (stats.Band). The
waiting submissions' rows are read, then each tracked element is stepped to its new rank: the steps
go through the added rows (in Python) and through a few stored neighbours of the element, read
from its band, all in one statement. Only refreshes write bands, under the group's lock, so a band
holds only rows of refreshed submissions; the contributor lookups, which read the measurements, leave
out every waiting submission in that same statement, so a submission that commits while a refresh
runs is never counted as stored, and is taken in by the next refresh. The work grows with the rows
added, not with the cell's history. Where a tracked rank would leave its band, or the band has grown
to twice a fresh one, the cell is left for cells.py to read in full, which writes a fresh band.
PostgreSQL only (unnest, LATERAL); cells.py reads a group in full elsewhere.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from uuid import UUID

from django.db import connection
from django.db.models import BooleanField, ExpressionWrapper, QuerySet

from benchhub.results import stats
from benchhub.results.models import INCLUDED_IN_CELLS, CellBand, Measurement

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

    n_submissions: int = 0
    n_contributors: int = 0
    n_excluded_correctness: int = 0
    n_excluded_degenerate: int = 0


@dataclass
class Cell:
    totals: CellTotals
    state: stats.OrderState
    bands: dict[str, stats.Band]


# One element of a band as CellBand stores it: (cell number, column number, element).
BandRow = tuple[int, int, stats.Ranked]


def band_rows(cell_key: int, bands: dict[str, tuple[stats.Band, list[stats.Ranked]]]) -> list[BandRow]:
    return [
        (cell_key, stats.COLUMNS.index(column), element)
        for column, (_, elements) in bands.items()
        for element in elements
    ]


@dataclass
class Refreshed:
    """A group's cells after a refresh, and what to write to their bands: `band_rows` inserted
    after the stored rows of the cells numbered in `replaced` are deleted. `unresolved`: cells left
    for a full read (their bands no longer serve their ranks)."""

    cells: dict[CellName, Cell]
    band_rows: list[BandRow] = field(default_factory=list)
    replaced: list[int] = field(default_factory=list)
    unresolved: set[CellName] = field(default_factory=set)


@dataclass
class Added:
    """The waiting submissions' rows of one cell."""

    cell_key: int
    columns: dict[str, list[stats.Ranked]] = field(default_factory=lambda: {column: [] for column in stats.COLUMNS})
    contributors: set[int] = field(default_factory=set)
    n_correctness: int = 0
    n_degenerate: int = 0


def _read_added(group: Group, waiting: list[Any]) -> dict[CellName, Added]:
    added: dict[CellName, Added] = {}
    rows = (
        Measurement.objects.filter(submission__in=waiting, **group.filter())
        .exclude(excluded_reason=Measurement.Excluded.HIDDEN)
        .annotate(included=ExpressionWrapper(INCLUDED_IN_CELLS, output_field=BooleanField()))
        .values_list(
            "submission_id",
            "cell_key_id",
            "variant_name",
            "batch_size",
            *stats.COLUMNS,
            "contributor_id",
            "excluded_reason",
            "included",
        )
    )
    for key, cell_key, variant, batch_size, tg_tps, baseline_tg_tps, speedup, contributor, excluded, included in rows:
        cell = added.setdefault((variant, batch_size), Added(cell_key))
        if included:
            for column, value in zip(stats.COLUMNS, (tg_tps, baseline_tg_tps, speedup), strict=True):
                cell.columns[column].append((value, ranked_key(key)))
            cell.contributors.add(contributor)
        elif excluded == Measurement.Excluded.CORRECTNESS_FAILED:
            cell.n_correctness += 1
        elif excluded == Measurement.Excluded.DEGENERATE_OUTPUT:
            cell.n_degenerate += 1
    for cell in added.values():
        for values in cell.columns.values():
            values.sort()
    return added


def where_sql(rows: QuerySet[Any]) -> tuple[str, list[Any]]:
    """The WHERE clause of `rows` as SQL and its parameters, for a statement of our own."""
    query = rows.query
    where, params = query.where.as_sql(query.get_compiler(connection=connection), connection)
    return where, list(params)


class _StoredRows:
    """What an incremental refresh reads of a group's stored rows, in one statement: each lookup a
    probe of an index (LATERAL ... LIMIT keeps the planner from hashing the whole group instead).
    Neighbours come from the bands, which hold refreshed submissions' rows only; contributors from
    the partial index on the measurements' included rows, leaving out every waiting submission."""

    def __init__(self, group: Group, added: dict[CellName, Added]) -> None:
        self.added = added
        waiting_sql, waiting_params = group.waiting_submissions().order_by().values("pk").query.sql_with_params()
        self.prefix = f"WITH waiting AS MATERIALIZED ({waiting_sql}) "
        self.prefix_params: list[Any] = [*waiting_params]
        # The cell's included rows, in the words of INCLUDED_IN_CELLS itself (the partial index's
        # condition: the planner uses it only where the query implies it).
        where, self.rows_params = where_sql(Measurement.objects.filter(INCLUDED_IN_CELLS))
        self.table = connection.ops.quote_name(Measurement._meta.db_table)
        self.rows = (
            f"FROM {self.table} WHERE {where} AND {self.table}.cell_key_id = q.cell_key "
            f"AND {self.table}.submission_id NOT IN (SELECT * FROM waiting)"
        )
        self.band = connection.ops.quote_name(CellBand._meta.db_table)
        self.parts: list[str] = []
        self.params: list[Any] = []

    def _add(
        self,
        kind: str,
        cells: list[CellName],
        inputs: dict[str, str],
        columns: list[list[Any]],
        lateral: str,
        lateral_params: list[Any],
    ) -> None:
        """One lookup per input row: q.i (its index), q.cell_key (of `cells`) and `inputs` (name: SQL
        type) from `columns`, then the LATERAL query run for each."""
        types = "".join(f", %s::{sql_type}[]" for sql_type in inputs.values())
        names = "".join(f", {name}" for name in inputs)
        self.parts.append(
            f"SELECT '{kind}', q.i, x.value, x.submission_id FROM unnest(%s::int[], %s::bigint[]{types}) "
            f"AS q(i, cell_key{names}) CROSS JOIN LATERAL ({lateral}) AS x"
        )
        keys = [self.added[name].cell_key for name in cells]
        self.params += [list(range(len(cells))), keys, *columns, *lateral_params]

    def neighbours(self, column: str, forward: bool, moves: list[tuple[CellName, stats.Move]]) -> None:
        """Each move's start, if it is in its band (it must be: a crash or a manual edit could leave it
        pointing at nothing), then up to |steps| elements of the band next to it in its direction."""
        order = "ASC" if forward else "DESC"
        band = self.band
        self._add(
            f"n{column}{int(forward)}",
            [name for name, _ in moves],
            {"start_value": "float8", "start_key": "uuid", "k": "int"},
            [
                [move.start[0] for _, move in moves],
                [move.start[1] for _, move in moves],
                [abs(move.steps) + 1 for _, move in moves],
            ],
            f"SELECT {band}.value, {band}.submission AS submission_id FROM {band} "
            f"WHERE {band}.cell_key_id = q.cell_key AND {band}.column_number = {stats.COLUMNS.index(column)} "
            f"AND ({band}.value, {band}.submission) {'>=' if forward else '<='} (q.start_value, q.start_key) "
            f"ORDER BY {band}.value {order}, {band}.submission {order} LIMIT q.k",
            [],
        )

    def contributors(self, pairs: list[tuple[CellName, int]]) -> None:
        """Each (cell, contributor) with a stored included row in the cell."""
        self._add(
            "c",
            [name for name, _ in pairs],
            {"contributor": "bigint"},
            [[c for _, c in pairs]],
            f"SELECT NULL::float8 AS value, NULL::uuid AS submission_id {self.rows} "
            f"AND {self.table}.contributor_id = q.contributor LIMIT 1",
            [*self.rows_params],
        )

    def read(self) -> dict[str, dict[int, list[stats.Ranked]]]:
        """Per lookup kind, per input index, the rows found (unordered)."""
        found: dict[str, dict[int, list[stats.Ranked]]] = {}
        if not self.parts:
            return found
        with connection.cursor() as cursor:
            cursor.execute(self.prefix + " UNION ALL ".join(self.parts), [*self.prefix_params, *self.params])
            for kind, index, value, key in cursor.fetchall():
                found.setdefault(kind, {}).setdefault(index, []).append((value, key and ranked_key(key)))
        return found


def merged(group: Group, stored: dict[CellName, Cell], waiting: list[Any]) -> Refreshed:
    """The stored cells with the waiting submissions' rows merged in, but for the unresolved ones
    (raises stats.StaleState when the stored elements are not where the state says)."""
    added = _read_added(group, waiting)
    empty = Cell(CellTotals(), {}, {})
    refreshed = Refreshed(dict(stored))
    states: dict[CellName, tuple[stats.OrderState, dict[str, stats.Band]]] = {}
    planned: dict[tuple[CellName, str], list[stats.Move | stats.Ranked]] = {}
    for name, cell in added.items():
        old = stored.get(name, empty)
        n = old.totals.n_submissions + len(cell.columns["speedup"])
        if n == old.totals.n_submissions:  # no included row added
            states[name] = (old.state, old.bands)
        elif old.totals.n_submissions == 0:  # the cell's first included rows: all of its values are here
            state, fresh = stats.tracked_and_bands(cell.columns)
            states[name] = (state, {column: band for column, (band, _) in fresh.items()})
            refreshed.band_rows += band_rows(cell.cell_key, fresh)
        else:
            widened = {column: stats.band_with(old.bands[column], cell.columns[column]) for column in stats.COLUMNS}
            ranks = stats.tracked_ranks(n)
            if not all(stats.band_holds(band, n, ranks[column]) for column, (band, _) in widened.items()):
                refreshed.unresolved.add(name)
                continue
            states[name] = (dict(old.state), {column: band for column, (band, _) in widened.items()})
            refreshed.band_rows += band_rows(cell.cell_key, widened)
            for column, values in cell.columns.items():
                planned[(name, column)] = stats.moves(old.totals.n_submissions, old.state[column], column, values)
    rows = _StoredRows(group, added)
    moving: dict[tuple[str, bool], list[tuple[tuple[CellName, str, int], stats.Move]]] = {}
    for column in stats.COLUMNS:
        for forward in (True, False):
            moving[(column, forward)] = chosen = [
                ((name, column, role), step)
                for (name, of), steps in planned.items()
                if of == column
                for role, step in enumerate(steps)
                if isinstance(step, stats.Move) and (step.steps >= 0) == forward
            ]
            if chosen:
                rows.neighbours(column, forward, [(place[0], move) for place, move in chosen])
    arriving = [(name, contributor) for name in states for contributor in sorted(added[name].contributors)]
    if arriving:
        rows.contributors(arriving)
    found = rows.read()
    reached: dict[tuple[CellName, str, int], stats.Ranked] = {}
    for (column, forward), chosen in moving.items():
        read = found.get(f"n{column}{int(forward)}", {})
        for index, (place, move) in enumerate(chosen):
            elements = sorted(read.get(index, []), reverse=not forward)
            if not elements or elements[0] != move.start:
                raise stats.StaleState(f"the tracked element {move.start} of {group} is not in its band")
            reached[place] = stats.resolve(move, elements[1:], added[place[0]].columns[column])
    known = {arriving[index] for index in found.get("c", {})}
    for name, (state, bands) in states.items():
        cell, totals = added[name], stored.get(name, empty).totals
        new_state = dict(state)
        for column in stats.COLUMNS:
            if (name, column) in planned:
                new_state[column] = [
                    reached[(name, column, role)] if isinstance(step, stats.Move) else step
                    for role, step in enumerate(planned[(name, column)])
                ]
        refreshed.cells[name] = Cell(
            CellTotals(
                totals.n_submissions + len(cell.columns["speedup"]),
                totals.n_contributors + sum((name, c) not in known for c in cell.contributors),
                totals.n_excluded_correctness + cell.n_correctness,
                totals.n_excluded_degenerate + cell.n_degenerate,
            ),
            new_state,
            bands,
        )
    return refreshed
