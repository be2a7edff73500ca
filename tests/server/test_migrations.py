"""Migrations that must not lock or rewrite the big tables, and the indexes they leave, run against
PostgreSQL."""

from __future__ import annotations

from typing import Any, NamedTuple

import pytest
from benchhub_agent import envelope
from django.db import IntegrityError, connection, transaction
from django.db.migrations.executor import MigrationExecutor

from benchhub.results import cells
from benchhub.results.models import LeaderboardCell, Measurement, Submission
from tests.conftest import Api, build_payload

pytestmark = pytest.mark.django_db(transaction=True)  # CONCURRENTLY cannot run inside a transaction

DROPPED = {
    ("results_measurement", "campaign_id"),
    ("results_measurement", "submission_id"),
    ("results_submissionvariant", "submission_id"),
}


def single_column_indexes() -> set[tuple[str, str]]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT t.relname, a.attname FROM pg_index i JOIN pg_class t ON t.oid = i.indrelid "
            "JOIN pg_attribute a ON a.attrelid = t.oid AND a.attnum = i.indkey[0] "
            "WHERE i.indnatts = 1 AND t.relname IN ('results_measurement', 'results_submissionvariant')"
        )
        return set(cursor.fetchall())


def foreign_keys() -> set[tuple[str, int]]:
    """Each constraint with its oid: one dropped and added again (checking every row) gets a new one."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT conname, oid FROM pg_constraint WHERE contype = 'f' AND conrelid IN "
            "('results_measurement'::regclass, 'results_submissionvariant'::regclass) AND convalidated"
        )
        return set(cursor.fetchall())


def migrate_to(name: str) -> None:
    executor = MigrationExecutor(connection)
    executor.migrate([("results", name)])


def test_0010_drops_the_covered_foreign_key_indexes_and_keeps_their_constraints() -> None:
    latest = MigrationExecutor(connection).loader.graph.leaf_nodes("results")[0][1]
    try:
        migrate_to("0009_submission_cell_group")
        keys = foreign_keys()
        assert single_column_indexes() >= DROPPED
        migrate_to("0010_drop_indexes_covered_by_others")
        assert not DROPPED & single_column_indexes()
        assert foreign_keys() == keys, "the constraints must be left as they were, not added again"
    finally:
        migrate_to(latest)


def cells_and_keys() -> list[tuple[Any, ...]]:
    """Each measurement's own names beside those of the cell key it points at."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT m.id, m.campaign_id, m.chip, m.gpu_cores, m.quant, m.variant_name, m.batch_size, "
            "k.campaign_id, k.chip, k.gpu_cores, k.quant, k.variant, k.batch_size "
            "FROM results_measurement m LEFT JOIN results_cellkey k ON k.id = m.cell_key_id ORDER BY m.id"
        )
        return cursor.fetchall()


def test_0011_numbers_the_cells_of_stored_measurements(api: Api, ada: envelope.Signer) -> None:
    """Measurements stored before 0011 get the number of their own cell, one number per cell, off
    Apple GPUs (no GPU core count) as well; refreshes after it take them in."""
    for machine in ({}, {"chip": "NVIDIA H200", "gpu_cores": None}, {}):
        assert api.submit(build_payload(machine=machine), ada).status_code == 201
    before = cells_and_keys()
    assert len(before) == 12 and all(row[1:7] == row[7:] for row in before)
    numbered = {
        row[1:7]: key
        for row, key in zip(
            before, Measurement.objects.order_by("id").values_list("cell_key_id", flat=True), strict=True
        )
    }
    assert len(set(numbered.values())) == len(numbered) == 8, "one number per cell, nulls alike"
    latest = MigrationExecutor(connection).loader.graph.leaf_nodes("results")[0][1]
    try:
        migrate_to("0010_drop_indexes_covered_by_others")
        migrate_to("0011_cell_key")
        after = cells_and_keys()
        assert [row[:7] for row in after] == [row[:7] for row in before]
        assert all(row[1:7] == row[7:] for row in after), "each measurement points at its own cell"
        assert len({row[7:] for row in after}) == 8
    finally:
        migrate_to(latest)
    Submission.objects.update(cells_refreshed_at=None)
    for values in Submission.objects.values_list("campaign_id", "chip", "gpu_cores", "quant").distinct():
        cells.refresh_group(cells.Group(*values))
    assert not Submission.objects.filter(cells_refreshed_at__isnull=True).exists()


def cell_table_options() -> list[str]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT coalesce(reloptions, '{}') FROM pg_class WHERE relname = 'results_leaderboardcell'")
        return list(cursor.fetchone()[0])


def test_0012_leaves_half_of_each_cell_page_free_for_the_in_place_rewrites(api: Api, ada: envelope.Signer) -> None:
    assert api.submit(build_payload(), ada).status_code == 201
    cells.refresh_all_cells()
    latest = MigrationExecutor(connection).loader.graph.leaf_nodes("results")[0][1]
    try:
        migrate_to("0011_cell_key")
        assert cell_table_options() == []
        migrate_to("0012_cell_revision")
        assert cell_table_options() == ["fillfactor=50"]
    finally:
        migrate_to(latest)
    assert set(LeaderboardCell.objects.values_list("revision", flat=True)) == {0}, "stored cells start at 0"
    cells.refresh_all_cells()
    assert set(LeaderboardCell.objects.values_list("revision", flat=True)) == {1}


def submission_indexes() -> dict[str, str]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT indexname, indexdef FROM pg_indexes WHERE tablename = 'results_submission'")
        return dict(cursor.fetchall())


def test_0013_drops_the_hash_like_index_and_the_covered_key_index_and_keeps_the_uniques(
    api: Api, ada: envelope.Signer
) -> None:
    like = "results_submission_payload_sha256_f027695a_like"
    key_index = "results_submission_key_id_72e30e23"
    latest = MigrationExecutor(connection).loader.graph.leaf_nodes("results")[0][1]
    try:
        migrate_to("0012_cell_revision")
        before = submission_indexes()
        assert {like, key_index, "results_submission_payload_sha256_f027695a_uniq"} <= set(before)
        migrate_to("0013_drop_indexes_no_lookup_uses")
        after = submission_indexes()
        assert set(before) - set(after) == {like, key_index, "results_submission_payload_sha256_f027695a_uniq"}
        assert set(after) - set(before) == {"submission_payload_unique"}
        assert "UNIQUE INDEX submission_payload_unique" in after["submission_payload_unique"]
        assert "(key_id, nonce)" in after["submission_key_nonce_unique"]
        migrate_to("0012_cell_revision")
        assert submission_indexes() == before
    finally:
        migrate_to(latest)
    first, second = (api.submit(build_payload(), ada).json()["id"] for _ in range(2))
    taken = Submission.objects.get(pk=first).payload_sha256
    with pytest.raises(IntegrityError, match="submission_payload_unique"), transaction.atomic():
        Submission.objects.filter(pk=second).update(payload_sha256=taken)


def measurement_indexes() -> dict[str, str]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT indexname, indexdef FROM pg_indexes WHERE tablename = 'results_measurement'")
        return dict(cursor.fetchall())


def stored_cells() -> list[tuple[Any, ...]]:
    fields = [f.attname for f in LeaderboardCell._meta.concrete_fields if f.name not in LeaderboardCell.WRITE_MARKS]
    return list(LeaderboardCell.objects.order_by("pk").values_list(*fields))


def test_0014_keys_the_covering_index_by_cell_number_and_goes_back(api: Api, ada: envelope.Signer) -> None:
    for _ in range(2):
        assert api.submit(build_payload(), ada).status_code == 201
    cells.refresh_all_cells()
    computed = stored_cells()
    latest = MigrationExecutor(connection).loader.graph.leaf_nodes("results")[0][1]
    try:
        migrate_to("0013_drop_indexes_no_lookup_uses")
        before = measurement_indexes()
        assert "measurement_cell_key_covering" not in before
        migrate_to("0014_measurement_cell_key_covering")
        after = measurement_indexes()
        assert set(before) ^ set(after) == {"measurement_cell_covering", "measurement_cell_key_covering"}
        assert after["measurement_cell_key_covering"].endswith(
            "(cell_key_id) INCLUDE (submission_id, tg_tps, baseline_tg_tps, speedup, contributor_id, excluded_reason)"
        )
        migrate_to("0013_drop_indexes_no_lookup_uses")
        assert measurement_indexes() == before
    finally:
        migrate_to(latest)
    cells.refresh_all_cells()  # reads every group in full through the new index
    assert stored_cells() == computed


COPIED_REFERENCES = {
    "results_measurement_campaign_id_f7356abb_fk_results_campaign_id",
    "results_measurement_contributor_id_44ee0854_fk_accounts_",
    "results_measurement_cell_key_id_77e6ced7_fk_results_cellkey_id",
}
CAMPAIGN_INDEXES = {"results_cellkey_campaign_id_61953458", "results_leaderboardcell_campaign_id_dbaef5a3"}


def measurement_constraints() -> set[str]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT conname FROM pg_constraint WHERE conrelid = 'results_measurement'::regclass")
        return {name for (name,) in cursor.fetchall()}


def index_names() -> set[str]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT indexname FROM pg_indexes WHERE schemaname = 'public'")
        return {name for (name,) in cursor.fetchall()}


def test_0016_drops_the_copied_references_constraints_and_goes_back(api: Api, ada: envelope.Signer) -> None:
    """The measurement's copies of its submission's campaign and contributor, and its cell's number,
    lose their constraints (the submission's and the variant's stay); going back adds them again,
    checked against every stored row. The ingest and a full refresh work on both sides."""
    assert api.submit(build_payload(), ada).status_code == 201
    latest = MigrationExecutor(connection).loader.graph.leaf_nodes("results")[0][1]
    try:
        migrate_to("0015_cell_bands")
        before = measurement_constraints()
        assert before >= COPIED_REFERENCES
        assert index_names() >= CAMPAIGN_INDEXES
        assert api.submit(build_payload(), ada).status_code == 201
        migrate_to("0016_denormalised_references_unconstrained")
        assert before - measurement_constraints() == COPIED_REFERENCES
        assert not CAMPAIGN_INDEXES & index_names()
        assert measurement_constraints() >= {
            "measurement_unique",
            "results_measurement_submission_id_4696d079_fk_results_s",
        }
        migrate_to("0015_cell_bands")
        assert measurement_constraints() == before
    finally:
        migrate_to(latest)
    assert api.submit(build_payload(), ada).status_code == 201
    cells.refresh_all_cells()
    assert set(LeaderboardCell.objects.values_list("n_submissions", flat=True)) == {3}


class IndexKeys(NamedTuple):
    table: str
    name: str
    columns: list[int]  # key columns by number (0: an expression), not the INCLUDE ones
    classes: list[int]  # their operator classes
    plain: bool  # no uniqueness, condition or expression of its own
    whole: bool  # no condition: it holds every row


def test_no_index_repeats_the_start_of_another() -> None:
    """An index whose key columns begin another's, in the same order, serves no lookup that the
    longer one does not (unless it enforces uniqueness, or it or the longer one is partial or
    indexes an expression), costs every insert its upkeep and can mislead the planner: the cell
    keys' index on the campaign made it read every cell key of the campaign to number one group's."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT t.relname, i.relname, string_to_array(x.indkey::text, ' ')::int[], x.indnkeyatts, "
            "string_to_array(x.indclass::text, ' ')::oid[], "
            "NOT x.indisunique AND x.indpred IS NULL AND x.indexprs IS NULL, x.indpred IS NULL "
            "FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid JOIN pg_class t ON t.oid = x.indrelid "
            "JOIN pg_namespace n ON n.oid = t.relnamespace WHERE n.nspname = 'public' "
            "AND split_part(t.relname, '_', 1) IN ('results', 'accounts', 'web')"
        )
        indexes = [
            IndexKeys(table, name, columns[:count], classes, plain, whole)
            for table, name, columns, count, classes, plain, whole in cursor.fetchall()
        ]
    assert len(indexes) > 30
    repeated = [
        (short.name, long.name)
        for short in indexes
        for long in indexes
        if short.table == long.table
        and short.plain
        and long.whole
        and len(short.columns) < len(long.columns)
        and long.columns[: len(short.columns)] == short.columns
        and long.classes[: len(short.classes)] == short.classes
    ]
    assert not repeated, "\n".join(map(str, repeated))
