"""Migration operations of our own (imported by the migrations that use them)."""

from __future__ import annotations

from typing import Any

from django.contrib.postgres.operations import AddIndexConcurrently, RemoveIndexConcurrently
from django.db import migrations


class _ConcurrentlyOnPostgreSQL:
    """An index operation CONCURRENTLY on PostgreSQL, where a plain one would block ingest for the
    minutes it takes at a million submissions; the plain operation elsewhere (SQLite)."""

    plain: Any  # the operation's plain form, whose database methods run off PostgreSQL

    def database_forwards(self, app_label: str, schema_editor: Any, from_state: Any, to_state: Any) -> None:
        if schema_editor.connection.vendor == "postgresql":
            super().database_forwards(app_label, schema_editor, from_state, to_state)  # type: ignore[misc]
        else:
            self.plain.database_forwards(self, app_label, schema_editor, from_state, to_state)

    def database_backwards(self, app_label: str, schema_editor: Any, from_state: Any, to_state: Any) -> None:
        if schema_editor.connection.vendor == "postgresql":
            super().database_backwards(app_label, schema_editor, from_state, to_state)  # type: ignore[misc]
        else:
            self.plain.database_backwards(self, app_label, schema_editor, from_state, to_state)


class AddIndexConcurrentlyOnPostgreSQL(_ConcurrentlyOnPostgreSQL, AddIndexConcurrently):
    plain = migrations.AddIndex


class RemoveIndexConcurrentlyOnPostgreSQL(_ConcurrentlyOnPostgreSQL, RemoveIndexConcurrently):
    plain = migrations.RemoveIndex


class AlterForeignKeyIndex(migrations.AlterField):
    """AlterField for a change of a foreign key's db_index alone: drops or creates the key's own
    index (CONCURRENTLY on PostgreSQL) and leaves the constraint as it is. Django's AlterField drops
    and re-adds the constraint, which checks every row under an exclusive lock: minutes of blocked
    ingest at a million submissions."""

    def database_forwards(self, app_label: str, schema_editor: Any, from_state: Any, to_state: Any) -> None:
        self._make_index_match(app_label, schema_editor, from_state, to_state)

    def database_backwards(self, app_label: str, schema_editor: Any, from_state: Any, to_state: Any) -> None:
        self._make_index_match(app_label, schema_editor, from_state, to_state)

    def _make_index_match(self, app_label: str, schema_editor: Any, from_state: Any, to_state: Any) -> None:
        """Gives the column of to_state's field an index exactly when that field has db_index."""
        old, new = (state.apps.get_model(app_label, self.model_name) for state in (from_state, to_state))
        old_field, new_field = old._meta.get_field(self.name), new._meta.get_field(self.name)
        old_kwargs, new_kwargs = (field.deconstruct()[3] for field in (old_field, new_field))
        old_kwargs.pop("db_index", None)
        new_kwargs.pop("db_index", None)
        if old_kwargs != new_kwargs or old_field.column != new_field.column:
            raise ValueError(f"{self.model_name}.{self.name}: AlterForeignKeyIndex changes db_index only")
        table = new._meta.db_table
        name = schema_editor._create_index_name(table, [new_field.column], suffix="")
        quote = schema_editor.quote_name
        concurrently = " CONCURRENTLY" if schema_editor.connection.vendor == "postgresql" else ""
        if new_field.db_index:
            schema_editor.execute(
                f"CREATE INDEX{concurrently} IF NOT EXISTS {quote(name)} ON {quote(table)} ({quote(new_field.column)})"
            )
        else:
            schema_editor.execute(f"DROP INDEX{concurrently} IF EXISTS {quote(name)}")


class RunSQLOnPostgreSQL(migrations.RunSQL):
    """RunSQL for what only PostgreSQL has (storage parameters); nothing elsewhere (SQLite)."""

    def database_forwards(self, app_label: str, schema_editor: Any, from_state: Any, to_state: Any) -> None:
        if schema_editor.connection.vendor == "postgresql":
            super().database_forwards(app_label, schema_editor, from_state, to_state)

    def database_backwards(self, app_label: str, schema_editor: Any, from_state: Any, to_state: Any) -> None:
        if schema_editor.connection.vendor == "postgresql":
            super().database_backwards(app_label, schema_editor, from_state, to_state)
