"""Cursor pagination of the list endpoints, with cursors checked before they reach the query."""

from __future__ import annotations

import base64
from datetime import UTC
from typing import Any
from urllib.parse import quote, urlencode

from django.utils.dateparse import parse_datetime
from rest_framework.exceptions import NotFound
from rest_framework.pagination import Cursor, CursorPagination
from rest_framework.request import Request

from benchhub.api.errors import ApiError
from benchhub.api.filters import BIGINT_LIMIT


class CheckedCursor(CursorPagination):
    """DRF hands a cursor's position to the query as it came, so a crafted one (`p=abc`, or an
    offset of +23:59 that PostgreSQL refuses) answered 500. A position must be a value of the
    ordering column, written as this API writes it; anything else is a 400 naming the cursor."""

    example_path = "/api/v1/"
    example_position = ""

    def canonical_position(self, position: str) -> str:
        raise NotImplementedError

    def get_paginated_response_schema(self, schema: dict[str, Any]) -> dict[str, Any]:
        """The API docs' example links: a cursor this API writes, not DRF's api.example.org/accounts/."""
        found = super().get_paginated_response_schema(schema)
        cursor = quote(base64.b64encode(urlencode({"p": self.example_position}).encode()).decode())
        for key in ("next", "previous"):
            found["properties"][key]["example"] = f"https://benchhub.example{self.example_path}?cursor={cursor}"
        return found

    def decode_cursor(self, request: Request) -> Cursor | None:
        try:
            cursor = super().decode_cursor(request)
            if cursor is None or cursor.position is None:
                return cursor
            position = self.canonical_position(str(cursor.position))
            return cursor._replace(position=position)  # type: ignore[arg-type]  # stubs say int; DRF's are str
        except (NotFound, ValueError, OverflowError):
            raise ApiError(
                400, "invalid_cursor", "The cursor is not one this API issued; start again without it.", "cursor"
            ) from None


class NewestFirst(CheckedCursor):
    example_path, example_position = "/api/v1/submissions/", "2026-11-29 10:00:00+00:00"
    page_size = 50
    max_page_size = 500
    page_size_query_param = "page_size"
    ordering = ("-received_at", "-id")

    def canonical_position(self, position: str) -> str:
        moment = parse_datetime(position)
        if moment is None or moment.tzinfo is None:
            raise ValueError(position)
        return str(moment.astimezone(UTC))  # as DRF writes an instance's received_at, read back in UTC


class ByIdDescending(CheckedCursor):
    example_path, example_position = "/api/v1/measurements/", "48213"
    page_size = 200
    max_page_size = 1000
    page_size_query_param = "page_size"
    ordering = ("-id",)

    def canonical_position(self, position: str) -> str:
        if not 0 <= int(position) < BIGINT_LIMIT:
            raise ValueError(position)
        return str(int(position))
