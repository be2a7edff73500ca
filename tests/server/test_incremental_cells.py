"""Incremental cell refreshes (cells.py) against the full recomputation they replace, on PostgreSQL:
the same cells, to the last bit and the last tracked element, after any sequence of arrivals,
exclusions, ties, late commits, moderation and stale state."""

from __future__ import annotations

import random
import re
from typing import Any

import pytest
from benchhub_agent import envelope
from django.db import connection
from django.db.models import Model
from django.test.utils import CaptureQueriesContext

from benchhub.accounts.models import Contributor
from benchhub.results import cells, incremental, moderation, stats
from benchhub.results.models import INCLUDED_IN_CELLS, CellBand, CellKey, LeaderboardCell, Measurement, Submission
from tests.conftest import Api, build_payload, cell_content_fields, persona

pytestmark = pytest.mark.django_db

# What a cell holds but its group (every cell compared is of one group); bands_hold checks the bands.
CELL_FIELDS = cell_content_fields("campaign", "chip", "gpu_cores", "quant")


@pytest.fixture
def crowd(api: Api, campaign: Any) -> list[envelope.Signer]:
    signers = [persona(name) for name in ("ada", "bob", "cole")]
    for signer, name in zip(signers, ("ada", "bob", "cole"), strict=True):
        assert api.register(signer, name).status_code == 201
    return signers


def submit(api: Api, signer: envelope.Signer, rng: random.Random) -> str:
    """A submission with values drawn from a few, so ties are common, and now and then an exclusion."""

    def reps() -> list[float]:
        return [rng.choice([100.0, 120.0, 150.0, 150.0, 180.0])] * 2

    options: dict[str, Any] = {}
    if rng.random() < 0.15:
        options["correctness"] = {"01": "fail"}
    elif rng.random() < 0.15:
        options["degenerate"] = {"01": True}
    sizes = rng.choice([(1, 4), (4,), (1, 4, 8)])
    tg = {name: {size: reps() for size in sizes} for name in ("upstream", "01")}
    response = api.submit(build_payload(tg=tg, **options), signer)
    assert response.status_code == 201, response.json()
    return str(response.json()["id"])


def snapshot(group: cells.Group) -> list[tuple[Any, ...]]:
    return sorted(LeaderboardCell.objects.filter(**group.filter()).values_list(*CELL_FIELDS))


def recomputed_in_full(group: cells.Group) -> list[tuple[Any, ...]]:
    """What a full read gives for the refreshed submissions, computed in a savepoint rolled back."""
    try:
        with connection.cursor() as cursor:
            cursor.execute("SAVEPOINT full_read")
        cells.refresh_group(group, full=True)
        return snapshot(group)
    finally:
        with connection.cursor() as cursor:
            cursor.execute("ROLLBACK TO SAVEPOINT full_read")


def assert_bands_hold(group: cells.Group) -> None:
    """Each cell's band in CellBand is exactly the stretch of each column's order its order_band
    names (every stored element between its ends, below of them before it, above after), and its
    tracked elements are those at their ranks in the stored rows, sorted here."""
    for cell in LeaderboardCell.objects.filter(**group.filter()):
        rows = Measurement.objects.filter(
            INCLUDED_IN_CELLS, **group.filter(), variant_name=cell.variant, batch_size=cell.batch_size
        ).exclude(submission__cells_refreshed_at=None)
        number = CellKey.objects.get(**group.filter(), variant=cell.variant, batch_size=cell.batch_size).pk
        assert cell.order_band is not None and cell.order_state is not None
        assert set(cell.order_band) == (set(stats.COLUMNS) if cell.n_submissions else set())
        for column, (below, above, lo, hi) in cell.order_band.items():
            ordered = sorted((value, str(key)) for value, key in rows.values_list(column, "submission_id"))
            stretch = ordered[below : len(ordered) - above]
            banded = CellBand.objects.filter(cell_key=number, column_number=stats.COLUMNS.index(column))
            assert sorted((value, str(key)) for value, key in banded.values_list("value", "submission")) == stretch
            assert (stretch[0], stretch[-1]) == (tuple(lo), tuple(hi))
            ranks = stats.tracked_ranks(len(ordered))[column]
            assert [tuple(element) for element in cell.order_state[column]] == [ordered[rank - 1] for rank in ranks]


def refresh_incrementally(group: cells.Group) -> None:
    with CaptureQueriesContext(connection) as queries:
        cells.refresh_group(group, only_if_waiting=True)
    sql = " ".join(query["sql"] for query in queries.captured_queries)
    assert "ROW_NUMBER" not in sql, "the refresh read the group's history"
    assert "CROSS JOIN LATERAL" in sql, "the refresh stepped no tracked element"
    assert_bands_hold(group)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_it_keeps_the_cells_a_full_read_gives_through_any_arrivals(
    api: Api, crowd: list[envelope.Signer], seed: int
) -> None:
    rng = random.Random(seed)
    first = submit(api, crowd[0], rng)
    group = cells.Group.of(Submission.objects.get(pk=first))
    cells.refresh_group(group)
    for _ in range(12):
        for _ in range(rng.randint(1, 4)):  # a burst that one refresh takes in
            submit(api, rng.choice(crowd), rng)
        refresh_incrementally(group)
        assert snapshot(group) == recomputed_in_full(group)
    assert not group.waiting_submissions().exists()
    assert LeaderboardCell.objects.get(variant="01", batch_size=4).n_contributors == 3


def test_it_leaves_a_submission_that_commits_during_the_refresh_for_the_next(
    api: Api, crowd: list[envelope.Signer]
) -> None:
    rng = random.Random(7)
    group = cells.Group.of(Submission.objects.get(pk=submit(api, crowd[0], rng)))
    cells.refresh_group(group)
    listed = [submit(api, crowd[1], rng) for _ in range(3)]
    late = submit(api, crowd[2], rng)  # committed after the refresh listed who was waiting
    stored = cells._stored_cells(group)
    assert stored is not None
    merged = incremental.merged(group, stored, listed)
    with_late = incremental.merged(group, stored, [*listed, late])
    assert merged != with_late, "the late submission's rows must not be stepped over as if stored"
    Submission.objects.filter(pk__in=listed).update(cells_refreshed_at="2026-12-01T00:00:00Z")
    LeaderboardCell.objects.filter(**group.filter()).delete()
    LeaderboardCell.objects.bulk_create([cells._cell(group, name, cell) for name, cell in merged.cells.items()])
    cells._write_bands(merged)
    refresh_incrementally(group)  # now the late one: counted twice if the first refresh had stepped over it
    assert not group.waiting_submissions().exists()
    assert snapshot(group) == recomputed_in_full(group)


def test_it_reads_a_group_in_full_after_a_moderator_hides_a_submission(
    api: Api, crowd: list[envelope.Signer], admin_user: Any
) -> None:
    rng = random.Random(11)
    ids = [submit(api, crowd[index % 3], rng) for index in range(6)]
    group = cells.Group.of(Submission.objects.get(pk=ids[0]))
    cells.refresh_group(group)
    before = snapshot(group)
    moderation.set_hidden(Submission.objects.filter(pk=ids[2]), True, admin_user, "test")
    assert set(LeaderboardCell.objects.filter(**group.filter()).values_list("order_state", flat=True)) == {None}
    cells.refresh_group(group, only_if_waiting=True)
    after = snapshot(group)
    assert after == recomputed_in_full(group)
    assert after != before
    assert LeaderboardCell.objects.get(variant="01", batch_size=4).n_submissions < 6
    submit(api, crowd[0], rng)
    refresh_incrementally(group)
    assert snapshot(group) == recomputed_in_full(group)


def test_it_recomputes_a_group_whose_state_points_past_its_rows(
    api: Api, crowd: list[envelope.Signer], caplog: pytest.LogCaptureFixture
) -> None:
    rng = random.Random(13)
    group = cells.Group.of(Submission.objects.get(pk=submit(api, crowd[0], rng)))
    submit(api, crowd[1], rng)
    cells.refresh_group(group)
    cell = LeaderboardCell.objects.get(variant="01", batch_size=4)
    # As if the rows had been re-derived with other values under the state (a rebuild that crashed).
    assert cell.order_state is not None
    cell.order_state = {column: [[0.0, key] for _, key in elements] for column, elements in cell.order_state.items()}
    cell.save()
    for _ in range(3):
        submit(api, crowd[2], rng)
    cells.refresh_group(group, only_if_waiting=True)
    assert "disagrees with its rows" in caplog.text
    assert snapshot(group) == recomputed_in_full(group)


def test_it_counts_a_contributor_once_whether_stored_or_arriving(api: Api, crowd: list[envelope.Signer]) -> None:
    rng = random.Random(17)
    group = cells.Group.of(Submission.objects.get(pk=submit(api, crowd[0], rng)))
    cells.refresh_group(group)
    for signer in (crowd[0], crowd[0], crowd[1], crowd[1]):
        submit(api, signer, rng)
    refresh_incrementally(group)
    counts = dict(LeaderboardCell.objects.filter(variant="upstream").values_list("batch_size", "n_contributors"))
    assert counts[4] == 2 == Contributor.objects.filter(submissions__measurements__batch_size=4).distinct().count()
    assert snapshot(group) == recomputed_in_full(group)


def measurement_scans(statement: str, kept: set[str], model: type[Model] = Measurement) -> list[dict[str, Any]]:
    """How PostgreSQL would read the measurements (or `model`'s table) for `statement`: the plan's
    node of each scan. The tables are tiny here, so the planner may prefer any index or none: it is
    left only the indexes `kept` and the constraints' (the others dropped in the test's transaction,
    rolled back after), and no sequential or bitmap scan."""
    table = model._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT indexname FROM pg_indexes WHERE tablename = %s AND indexname NOT IN "
            "(SELECT conname FROM pg_constraint)",
            [table],
        )
        for (index,) in cursor.fetchall():
            if index not in kept:
                cursor.execute(f"DROP INDEX {connection.ops.quote_name(index)}")
        cursor.execute("SET LOCAL enable_seqscan = off")
        cursor.execute("SET LOCAL enable_bitmapscan = off")
        cursor.execute("EXPLAIN (FORMAT JSON) " + statement)
        (plan,) = cursor.fetchone()

    def scans(node: dict[str, Any]) -> list[dict[str, Any]]:
        own = [node] if node.get("Relation Name") == table else []
        return own + [scan for child in node.get("Plans", []) for scan in scans(child)]

    found = scans(plan[0]["Plan"])
    assert found, plan
    return found


def test_its_lookups_are_probes_of_the_bands_and_the_partial_index(api: Api, crowd: list[envelope.Signer]) -> None:
    """Neighbours are read by the bands' primary key. The planner uses a partial index only where
    the query implies its condition: a contributor lookup that stopped implying INCLUDED_IN_CELLS
    would scan the group (seconds at a million submissions)."""
    rng = random.Random(19)
    group = cells.Group.of(Submission.objects.get(pk=submit(api, crowd[0], rng)))
    cells.refresh_group(group)
    for signer in crowd:
        submit(api, signer, rng)
    with CaptureQueriesContext(connection) as queries:
        cells.refresh_group(group, only_if_waiting=True)
    (statement,) = [query["sql"] for query in queries.captured_queries if "CROSS JOIN LATERAL" in query["sql"]]
    found = measurement_scans(statement, {"measurement_contributor_cell"})
    assert {(node["Node Type"], node.get("Index Name")) for node in found} <= {
        ("Index Scan", "measurement_contributor_cell"),
        ("Index Only Scan", "measurement_contributor_cell"),
    }, found
    banded = measurement_scans(statement, set(), CellBand)
    assert len(banded) == 6, banded  # three columns, both directions
    assert {node["Node Type"] for node in banded} <= {"Index Scan", "Index Only Scan"}, banded
    assert {node.get("Index Name") for node in banded} == {f"{CellBand._meta.db_table}_pkey"}, banded
    # a range of the key from the start element on, not the cell's band filtered
    bounded = re.compile(
        r"\(\(cell_key_id = q(_\d)?\.cell_key\) AND \(column_number = \d\) AND \(ROW\(value, submission\) [<>]="
    )
    assert all(bounded.match(node["Index Cond"]) for node in banded), banded


def test_a_full_read_is_an_index_only_scan_of_its_cell_numbers(api: Api, crowd: list[envelope.Signer]) -> None:
    """A full read of a group (a new group, moderation, a rebuild's cell pass) takes every row of its
    cells: its totals and each column's ranking must read them from the covering index alone, by the
    cells' numbers (one heap page per row at a million submissions otherwise), and so name no
    column the index lacks."""
    rng = random.Random(23)
    for signer in crowd:
        submit(api, signer, rng)
    group = cells.Group.of(Submission.objects.order_by("received_at").first())
    with CaptureQueriesContext(connection) as queries:
        cells.refresh_group(group, full=True)
    table = Measurement._meta.db_table
    statements = [
        query["sql"]
        for query in queries.captured_queries
        if query["sql"].startswith(("SELECT", "WITH")) and f'FROM "{table}"' in query["sql"]
    ]
    assert len(statements) == 1 + len(stats.COLUMNS), statements  # the totals, then one ranking a column
    assert sum("ROW_NUMBER" in statement for statement in statements) == len(stats.COLUMNS)
    for statement in statements:
        (scan,) = measurement_scans(statement, {"measurement_cell_key_covering"})
        assert (scan["Node Type"], scan["Index Name"]) == ("Index Only Scan", "measurement_cell_key_covering"), scan
        # ranges of the index, one per cell, not all of it filtered
        assert scan["Index Cond"].startswith("(cell_key_id = ANY "), scan


def written_rows() -> dict[str, int]:
    """This transaction's writes to the cell table so far, as PostgreSQL counts them."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT n_tup_ins, n_tup_upd, n_tup_hot_upd, n_tup_del FROM pg_stat_xact_user_tables WHERE relname = %s",
            [LeaderboardCell._meta.db_table],
        )
        row = cursor.fetchone()
    return dict(zip(("inserted", "updated", "hot", "deleted"), row or (0, 0, 0, 0), strict=True))


def test_it_rewrites_the_cells_it_keeps_in_place_and_inserts_only_new_ones(
    api: Api, crowd: list[envelope.Signer]
) -> None:
    """A refresh updates each kept cell (same id, revision raised by one: what the read cache's
    version counts) without touching an indexed column, so PostgreSQL keeps the new version on its
    page (HOT) instead of a dead copy of the group per refresh; cells a submission adds are inserted."""
    first = api.submit(build_payload(tg={"upstream": {4: [100, 100]}, "01": {4: [150, 150]}}), crowd[0])
    group = cells.Group.of(Submission.objects.get(pk=first.json()["id"]))
    cells.refresh_group(group)
    before = {cell.pk: cell for cell in LeaderboardCell.objects.filter(**group.filter())}
    assert len(before) == 2
    second = build_payload(tg={"upstream": {1: [90, 90], 4: [110, 110]}, "01": {1: [95, 95], 4: [170, 170]}})
    assert api.submit(second, crowd[1]).status_code == 201
    written = written_rows()

    refresh_incrementally(group)

    after = {cell.pk: cell for cell in LeaderboardCell.objects.filter(**group.filter())}
    counts = {name: count - written[name] for name, count in written_rows().items()}
    assert counts == {"inserted": 2, "updated": 2, "hot": 2, "deleted": 0}
    assert set(before) < set(after)
    for pk, cell in before.items():
        assert (after[pk].revision, after[pk].n_submissions) == (cell.revision + 1, 2)
        assert after[pk].updated_at > cell.updated_at
    assert sorted((cell.batch_size, cell.revision) for pk, cell in after.items() if pk not in before) == [
        (1, 0),
        (1, 0),
    ]
    assert snapshot(group) == recomputed_in_full(group)


def test_a_full_read_deletes_the_cells_left_without_rows_and_keeps_the_others(
    api: Api, crowd: list[envelope.Signer], admin_user: Any
) -> None:
    first = api.submit(build_payload(tg={"upstream": {4: [100, 100]}, "01": {4: [150, 150]}}), crowd[0])
    wider = build_payload(tg={"upstream": {1: [90, 90], 4: [110, 110]}, "01": {1: [95, 95], 4: [170, 170]}})
    second = api.submit(wider, crowd[1])
    group = cells.Group.of(Submission.objects.get(pk=first.json()["id"]))
    cells.refresh_group(group)
    kept = dict(LeaderboardCell.objects.filter(**group.filter(), batch_size=4).values_list("variant", "pk"))

    moderation.set_hidden(Submission.objects.filter(pk=second.json()["id"]), True, admin_user, "test")
    cells.refresh_group(group)

    left = LeaderboardCell.objects.filter(**group.filter())
    assert dict(left.values_list("variant", "pk")) == kept
    assert set(left.values_list("batch_size", "n_submissions", "revision")) == {(4, 1, 1)}


def test_it_reads_alone_the_cells_whose_bands_no_longer_serve_them(
    api: Api, crowd: list[envelope.Signer], monkeypatch: pytest.MonkeyPatch
) -> None:
    """With bands of no margin, tracked ranks soon leave them: those cells, and only those, are read
    in full and given fresh bands; the cells stay what a full read gives."""
    monkeypatch.setattr(stats, "BAND_MIN_MARGIN", 0)
    read_in_full: list[set[Any] | None] = []
    read_group = cells._read_group

    def recording(group: cells.Group, waiting: list[Any], only: set[Any] | None = None) -> incremental.Refreshed:
        read_in_full.append(only)
        return read_group(group, waiting, only)

    monkeypatch.setattr(cells, "_read_group", recording)
    rng = random.Random(29)
    group = cells.Group.of(Submission.objects.get(pk=submit(api, crowd[0], rng)))
    cells.refresh_group(group)
    assert read_in_full == [None]
    subsets: list[set[Any]] = []
    for _ in range(14):
        for _ in range(rng.randint(1, 3)):
            submit(api, rng.choice(crowd), rng)
        read_in_full.clear()
        cells.refresh_group(group, only_if_waiting=True)
        assert None not in read_in_full, "a refresh read the whole group"
        subsets += [only for only in read_in_full if only is not None]
        assert_bands_hold(group)
        assert snapshot(group) == recomputed_in_full(group)
    assert subsets, "no band ran out"
    assert any(len(only) < LeaderboardCell.objects.filter(**group.filter()).count() for only in subsets)


def test_a_full_read_takes_each_band_from_the_ranks_it_needs(
    api: Api, crowd: list[envelope.Signer], monkeypatch: pytest.MonkeyPatch
) -> None:
    """With bands narrower than their cells, a full read's bands and tracked elements are still
    exactly those of the rows sorted in full."""
    monkeypatch.setattr(stats, "BAND_MIN_MARGIN", 0)
    rng = random.Random(31)
    for index in range(9):
        submit(api, crowd[index % 3], rng)
    group = cells.Group.of(Submission.objects.order_by("received_at").first())
    cells.refresh_group(group, full=True)
    assert_bands_hold(group)
    narrower = [
        band
        for band in LeaderboardCell.objects.filter(**group.filter()).values_list("order_band", flat=True)
        if any(below or above for below, above, _, _ in band.values())
    ]
    assert narrower, "every band was its whole cell"
