"""Migrations that must not lock or rewrite the big tables, run against PostgreSQL."""

from __future__ import annotations

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

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
    keys = foreign_keys()
    try:
        migrate_to("0009_submission_cell_group")
        assert single_column_indexes() >= DROPPED
        migrate_to("0010_drop_indexes_covered_by_others")
        assert not DROPPED & single_column_indexes()
        assert foreign_keys() == keys, "the constraints must be left as they were, not added again"
    finally:
        migrate_to(latest)
