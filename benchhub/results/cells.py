"""Keep leaderboard cells up to date from Measurement rows. Every function is idempotent: running
one twice, or after a crash, gives the same cells.

All cells a submission touches share its campaign, chip, GPU core count and quant (one machine,
one model): a "group". Refreshes are queued per group, not per submission, so a burst of
submissions into one group costs one refresh (tasks.queue_refresh). A refresh, under the group's
lock, takes the submissions waiting for the group (`cells_refreshed_at IS NULL`) into its cells
and marks them refreshed. The invariant: a group's cells aggregate exactly the group's refreshed
submissions.

- Incremental (PostgreSQL, the common case): a cell keeps the elements at the ranks its statistics
  need (`order_state`, see stats.py) and a band of each column's order around them (`order_band`,
  its elements in CellBand). The waiting submissions' values are merged in by stepping each
  tracked element to its new rank through its band, reading a few neighbours of each: the work
  grows with the submissions added, not with the cell's history. A cell whose band no longer serves
  its ranks is read in full alone, which gives it a fresh band.
- Full: the whole group is read (grouped per cell inside the database) when a cell's state is
  unknown (null: a new group, rows rewritten by moderation, SQLite), or asked for; every cell of it
  gets a fresh band.

Either way the group's cells are then written in place: one UPDATE per cell, sent together, which
changes no indexed column, so PostgreSQL keeps each new version on its page (a HOT update) instead
of leaving the table and its indexes a dead copy of every cell per refresh; new cells are inserted,
cells left without rows deleted.
"""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass
from typing import Any

from django.db import connection, transaction
from django.db.models import Count, Exists, OuterRef, Q, QuerySet
from django.utils import timezone

from benchhub.results import incremental, stats
from benchhub.results.incremental import Cell, CellName, CellTotals, Refreshed
from benchhub.results.models import INCLUDED_IN_CELLS, CellBand, CellKey, LeaderboardCell, Measurement, Submission
from benchhub.results.models import CellName as CellNameFields

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Group:
    campaign_id: int
    chip: str
    gpu_cores: int | None
    quant: str

    def sort_key(self) -> tuple[int, str, int, str]:
        return (self.campaign_id, self.chip, -1 if self.gpu_cores is None else self.gpu_cores, self.quant)

    def lock_id(self) -> int:
        digest = hashlib.sha256(repr(self).encode()).digest()
        return int.from_bytes(digest[:8], "big", signed=True)

    def filter(self) -> dict[str, object]:
        return {"campaign_id": self.campaign_id, "chip": self.chip, "gpu_cores": self.gpu_cores, "quant": self.quant}

    def task_args(self) -> tuple[int, str, int | None, str]:
        return (self.campaign_id, self.chip, self.gpu_cores, self.quant)

    @classmethod
    def of(cls, submission: Submission) -> Group:
        """The group of every cell the submission touches (measurements copy these four facts)."""
        return cls(submission.campaign_id, submission.chip, submission.gpu_cores, submission.quant)

    def waiting_submissions(self) -> QuerySet[Submission]:
        """Submissions of the group whose measurements are not yet in its cells."""
        return Submission.objects.filter(cells_refreshed_at__isnull=True, **self.filter())


def _lock(group: Group) -> None:
    """Serialise refreshes of one group, so a slow refresh can never overwrite a newer one with an
    older snapshot; taken before reading, so the read sees every committed measurement."""
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(%s)", [group.lock_id()])


def _read_group(group: Group, waiting: list[Any], only: set[CellName] | None = None) -> Refreshed:
    """Every cell recomputed from all of its rows, with a fresh band, inside the database: its
    totals grouped per cell, then per column only the stretch of each cell's order its fresh band
    holds (ranked by a window function), so a few hundred rows a cell reach Python instead of all
    of them. Both read the group's cell numbers (those of `only`, if given) in
    measurement_cell_key_covering, index-only. Rows of submissions that started waiting after
    `waiting` was read are left out, so that they stay for the next refresh and are never counted
    twice; every statement sees the same rows (the group's lock keeps refreshes and moderation out,
    a late submission is left out by each)."""
    names: dict[int, CellName] = {
        number: (variant, batch_size)
        for number, variant, batch_size in CellKey.objects.filter(**group.filter()).values_list(
            "pk", "variant", "batch_size"
        )
        if only is None or (variant, batch_size) in only
    }
    late = group.waiting_submissions().exclude(pk__in=waiting).values("pk")
    rows = (
        Measurement.objects.filter(cell_key__in=list(names))
        .exclude(excluded_reason=Measurement.Excluded.HIDDEN)
        .exclude(submission__in=late)
        .order_by()
    )
    totals = {
        number: CellTotals(*counts)
        for number, *counts in rows.values("cell_key")
        .annotate(
            n=Count("cell_key", filter=INCLUDED_IN_CELLS),
            contributors=Count("contributor", distinct=True, filter=INCLUDED_IN_CELLS),
            n_correctness=Count("cell_key", filter=Q(excluded_reason=Measurement.Excluded.CORRECTNESS_FAILED)),
            n_degenerate=Count("cell_key", filter=Q(excluded_reason=Measurement.Excluded.DEGENERATE_OUTPUT)),
        )
        .values_list("cell_key", "n", "contributors", "n_correctness", "n_degenerate")
    }
    ranges = {
        number: {
            column: stats.band_range(cell.n_submissions, ranks)
            for column, ranks in stats.tracked_ranks(cell.n_submissions).items()
        }
        for number, cell in totals.items()
        if cell.n_submissions
    }
    stretches = _stretches(rows.filter(INCLUDED_IN_CELLS), ranges)
    read = Refreshed({}, replaced=list(names))
    for number, cell in totals.items():
        state: stats.OrderState = {}
        bands: dict[str, tuple[stats.Band, list[stats.Ranked]]] = {}
        if cell.n_submissions:
            for column, ranks in stats.tracked_ranks(cell.n_submissions).items():
                stretch = stretches.get((number, column), [])
                band, state[column] = stats.band_from(cell.n_submissions, ranges[number][column][0], stretch, ranks)
                bands[column] = (band, stretch)
        read.cells[names[number]] = Cell(cell, state, {column: band for column, (band, _) in bands.items()})
        read.band_rows += incremental.band_rows(number, bands)
    return read


def _stretches(
    included: QuerySet[Measurement], ranges: dict[int, dict[str, tuple[int, int]]]
) -> dict[tuple[int, str], list[stats.Ranked]]:
    """Per (cell number, column), the cell's included elements ranked first to last (its entry
    in `ranges`), in order: one statement per column, each ranking every cell's rows in the
    database (ROW_NUMBER over the cell's order, ties broken by the submission) and returning only
    those ranks."""
    found: dict[tuple[int, str], list[stats.Ranked]] = {}
    if not ranges:
        return found
    where, where_params = incremental.where_sql(included)
    quote = connection.ops.quote_name
    table = quote(Measurement._meta.db_table)
    columns = {field.name: f"{table}.{quote(field.column)}" for field in Measurement._meta.concrete_fields}
    cell, submission = columns["cell_key"], columns["submission"]
    for column in stats.COLUMNS:
        value = columns[column]
        bounds = [bound for number, ends in ranges.items() for bound in (number, *ends[column])]
        statement = (
            f"WITH bounds (cell_number, low_rank, high_rank) AS (VALUES {', '.join(['(%s, %s, %s)'] * len(ranges))}) "
            f"SELECT ranked.cell_number, ranked.value, ranked.submission FROM (SELECT {cell} AS cell_number, "
            f"{value} AS value, {submission} AS submission, ROW_NUMBER() OVER (PARTITION BY {cell} ORDER BY "
            f"{value}, {submission}) AS position FROM {table} WHERE {where}) AS ranked JOIN bounds ON "
            "ranked.cell_number = bounds.cell_number WHERE ranked.position BETWEEN bounds.low_rank AND "
            "bounds.high_rank ORDER BY ranked.cell_number, ranked.position"
        )
        with connection.cursor() as cursor:
            cursor.execute(statement, [*bounds, *where_params])
            for number, element, key in cursor.fetchall():
                found.setdefault((number, column), []).append((element, incremental.ranked_key(key)))
    return found


def _stored_cells(group: Group) -> dict[CellName, Cell] | None:
    """The group's cells as stored; None when any cell's order state or band is unknown."""
    stored: dict[CellName, Cell] = {}
    rows = LeaderboardCell.objects.filter(**group.filter()).values_list(
        "variant", "batch_size", *(name for name in CellTotals.__dataclass_fields__), "order_state", "order_band"
    )
    for variant, batch_size, *totals, order_state, order_band in rows:
        cell_totals = CellTotals(*totals)
        if (
            order_state is None
            or order_band is None
            or (cell_totals.n_submissions and set(order_band) != set(stats.COLUMNS))
        ):
            return None
        state = {column: [(value, key) for value, key in elements] for column, elements in order_state.items()}
        bands = {
            column: stats.Band(below, above, tuple(lo), tuple(hi))
            for column, (below, above, lo, hi) in order_band.items()
        }
        stored[(variant, batch_size)] = Cell(cell_totals, state, bands)
    return stored


def _write_bands(refreshed: Refreshed) -> None:
    """The bands' stored elements as the refresh left them. On PostgreSQL the rows go in as four
    arrays (unnest): a full read of a group writes ~12,000 at a million submissions, which cost
    ~300 ms of Python as model instances."""
    if refreshed.replaced:
        CellBand.objects.filter(cell_key__in=refreshed.replaced).delete()
    if not refreshed.band_rows:
        return
    if connection.vendor != "postgresql":
        CellBand.objects.bulk_create(
            CellBand(cell_key_id=cell_key, column_number=column, value=value, submission=key)
            for cell_key, column, (value, key) in refreshed.band_rows
        )
        return
    quote = connection.ops.quote_name
    columns_of = {field.name: quote(field.column) for field in CellBand._meta.concrete_fields}
    fields = ", ".join(columns_of[name] for name in ("cell_key", "column_number", "value", "submission"))
    keys, columns, values, submissions = zip(
        *((cell_key, column, value, key) for cell_key, column, (value, key) in refreshed.band_rows), strict=True
    )
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {quote(CellBand._meta.db_table)} ({fields}) "
            "SELECT * FROM unnest(%s::bigint[], %s::smallint[], %s::float8[], %s::uuid[])",
            [list(keys), list(columns), list(values), list(submissions)],
        )


def _cell(group: Group, name: CellName, cell: Cell) -> LeaderboardCell:
    totals, state = cell.totals, cell.state
    aggregate = stats.cell_stats(totals.n_submissions, state, totals.n_contributors)
    return LeaderboardCell(
        **group.filter(),
        variant=name[0],
        batch_size=name[1],
        tg_tps=aggregate.tg_tps if aggregate else None,
        baseline_tg_tps=aggregate.baseline_tg_tps if aggregate else None,
        speedup=aggregate.speedup if aggregate else None,
        ci_low=aggregate.ci_low if aggregate else None,
        ci_high=aggregate.ci_high if aggregate else None,
        n_submissions=totals.n_submissions,
        n_contributors=totals.n_contributors,
        n_excluded_correctness=totals.n_excluded_correctness,
        n_excluded_degenerate=totals.n_excluded_degenerate,
        order_state=state,
        order_band={
            column: [band.below, band.above, list(band.lo), list(band.hi)] for column, band in cell.bands.items()
        },
    )


# What names a cell: never rewritten (its unique index and the campaign's are the table's only
# indexes but the primary key's, so a rewrite changes no indexed column).
CELL_NAME_FIELDS = frozenset({"campaign", *(field.name for field in CellNameFields._meta.get_fields())})


def _write_cells(group: Group, cells: list[LeaderboardCell]) -> None:
    """Make the group's stored cells these: kept ones updated in place with their revision raised
    by one (what readcache.cells_version counts), new ones inserted, the others deleted."""
    stored = {
        (variant, batch_size): pk
        for variant, batch_size, pk in LeaderboardCell.objects.filter(**group.filter()).values_list(
            "variant", "batch_size", "pk"
        )
    }
    named = {(cell.variant, cell.batch_size) for cell in cells}
    gone = [pk for name, pk in stored.items() if name not in named]
    if gone:
        LeaderboardCell.objects.filter(pk__in=gone).delete()
    LeaderboardCell.objects.bulk_create([cell for cell in cells if (cell.variant, cell.batch_size) not in stored])
    kept = [cell for cell in cells if (cell.variant, cell.batch_size) in stored]
    if not kept:
        return
    meta = LeaderboardCell._meta
    fields = [
        field
        for field in meta.concrete_fields
        if not field.primary_key and field.name not in CELL_NAME_FIELDS and field.name != "revision"
    ]
    quote = connection.ops.quote_name
    assignments = ", ".join(f"{quote(field.column)} = %s" for field in fields)
    revision = quote("revision")
    now = timezone.now()
    rows = []
    for cell in kept:
        cell.pk = stored[(cell.variant, cell.batch_size)]
        cell.updated_at = now
        rows.append([*(field.get_db_prep_save(getattr(cell, field.attname), connection) for field in fields), cell.pk])
    with connection.cursor() as cursor:  # one round trip on psycopg (a pipeline), one statement prepared
        cursor.executemany(
            f"UPDATE {quote(meta.db_table)} SET {assignments}, {revision} = {revision} + 1 "
            f"WHERE {quote(meta.pk.column)} = %s",
            rows,
        )


@transaction.atomic
def refresh_group(group: Group, only_if_waiting: bool = False, full: bool = False) -> int:
    """Take the submissions waiting for the group into its cells and mark them refreshed; returns
    the number of cells. Incremental where the cells' order state allows it; read in full when
    asked (`full`) or when nobody waits, unless only_if_waiting (then a duplicate or late refresh
    message costs one query)."""
    _lock(group)
    # Read before the measurements: every submission listed here has committed, so its rows are
    # read below. One that commits in between stays waiting for its own queued refresh.
    waiting = list(group.waiting_submissions().values_list("pk", flat=True))
    if only_if_waiting and not waiting:
        return 0
    refreshed = None
    mergeable = waiting and not full and connection.vendor == "postgresql"
    stored = _stored_cells(group) if mergeable else None
    if stored:
        try:
            refreshed = incremental.merged(group, stored, waiting)
        except stats.StaleState:
            logger.warning("the order state of %s disagrees with its rows; recomputing the group", group)
    if refreshed is None:
        refreshed = _read_group(group, waiting)
    elif refreshed.unresolved:  # cells whose bands no longer serve them: read in full, fresh bands
        logger.debug(
            "%s: %d cell(s) read in full, their bands no longer serving them", group, len(refreshed.unresolved)
        )
        reread = _read_group(group, waiting, only=refreshed.unresolved)
        refreshed.cells |= reread.cells
        refreshed.band_rows += reread.band_rows
        refreshed.replaced += reread.replaced
    _write_cells(group, [_cell(group, name, cell) for name, cell in refreshed.cells.items()])
    _write_bands(refreshed)
    if waiting:
        Submission.objects.filter(pk__in=waiting).update(cells_refreshed_at=timezone.now())
    return len(refreshed.cells)


def forget_order_state(group: Group) -> None:
    """Make the group's next refresh read it in full: for changes other than submissions arriving
    (a moderator hiding or restoring one rewrites its rows). Takes the group's lock, so no refresh
    in progress can write a state computed before the change."""
    _lock(group)
    LeaderboardCell.objects.filter(**group.filter()).update(order_state=None, order_band=None)


def refresh_submission_cells(submission_id: str) -> int:
    """Refresh the group of cells the submission touches (and so mark it refreshed)."""
    submission = Submission.objects.filter(pk=submission_id).first()
    if submission is None:
        return 0
    return refresh_group(Group.of(submission))


def refresh_all_cells(workers: int = 1) -> int:
    """Recompute every cell in full, taking in every waiting submission, and drop cells that have
    no rows, one group at a time (memory bounded by the largest group, not by the table): in
    `workers` processes on PostgreSQL when the caller holds no transaction open."""
    # The groups with rows: from the cells' numbers, each probed in the covering index (a distinct
    # over the measurements would read all of that index, 27 entries a submission).
    named = Measurement.objects.filter(cell_key=OuterRef("pk"))
    groups = {
        Group(*values)
        for values in CellKey.objects.filter(Exists(named))
        .order_by()
        .values_list("campaign_id", "chip", "gpu_cores", "quant")
        .distinct()
    } | {
        Group(*values)
        for values in Submission.objects.filter(cells_refreshed_at__isnull=True)
        .order_by()
        .values_list("campaign_id", "chip", "gpu_cores", "quant")
        .distinct()
    }
    ordered = sorted(groups, key=Group.sort_key)
    if workers > 1 and connection.vendor == "postgresql" and not connection.in_atomic_block:
        from benchhub.results import rebuild_worker

        tasks = [group.task_args() for group in ordered]
        count = rebuild_worker.total_in_processes(f"{__name__}.refresh_group_in_full", tasks, workers)
    else:
        count = sum(refresh_group(group, full=True) for group in ordered)
    for values in (
        LeaderboardCell.objects.order_by().values_list("campaign_id", "chip", "gpu_cores", "quant").distinct()
    ):
        if Group(*values) not in groups:
            LeaderboardCell.objects.filter(**Group(*values).filter()).delete()
            CellBand.objects.filter(cell_key__in=CellKey.objects.filter(**Group(*values).filter())).delete()
    return count


def refresh_group_in_full(task_args: tuple[int, str, int | None, str]) -> int:
    """One group of `refresh_all_cells` in a worker process."""
    return refresh_group(Group(*task_args), full=True)
