"""First rows created under concurrency: `get_or_insert` is Django's get_or_create without the failed
INSERT. get_or_create inserts and, when a concurrent request inserted first, catches the unique
violation, which PostgreSQL has already logged as an ERROR (issue 46: two uploads naming a new chip at
once). INSERT ... ON CONFLICT DO NOTHING (bulk_create's ignore_conflicts, INSERT OR IGNORE on SQLite)
waits for the other insert and then does nothing, so no statement fails on either database."""

from __future__ import annotations

from typing import Any, TypeVar

from django.db import models

Row = TypeVar("Row", bound=models.Model)


def get_or_insert(model: type[Row], lookup: dict[str, Any], defaults: dict[str, Any] | None = None) -> Row:
    """The row matching `lookup` (unique together), inserted with `defaults` when there is none."""
    return found_or_inserted(model, lookup, defaults)[0]


def found_or_inserted(
    model: type[Row], lookup: dict[str, Any], defaults: dict[str, Any] | None = None
) -> tuple[Row, bool]:
    """get_or_insert, and whether the row was missing before this call (another request may have
    inserted it meanwhile: then both say so)."""
    found = model._default_manager.filter(**lookup).first()
    if found is not None:
        return found, False
    model._default_manager.bulk_create([model(**lookup, **(defaults or {}))], ignore_conflicts=True)
    return model._default_manager.get(**lookup), True
