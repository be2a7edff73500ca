"""Addressing every field of a payload by its path, as the schema's error messages name it."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

FieldPath = tuple[str | int, ...]
# The fields of the submission schema that may be left out, and those that may be null.
OPTIONAL = {("machine", "os_build"), ("model", "label")}
NULLABLE = {("machine", "gpu_cores"), ("machine", "low_power_mode")}


def dotted(path: FieldPath) -> str:
    text = ""
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else part)
    return text


def leaves_and_keys(value: Any, path: FieldPath = ()) -> Iterator[tuple[FieldPath, Any]]:
    """Every (path, value) in a payload, containers included."""
    if path:
        yield path, value
    if isinstance(value, dict):
        for key, item in value.items():
            yield from leaves_and_keys(item, (*path, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from leaves_and_keys(item, (*path, index))


def wrong_types(value: Any) -> list[Any]:
    """Values of every JSON type but the field's own (bool and int told apart, as JSON Schema does)."""
    candidates: list[Any] = [None, True, 7, 2.5, "x", [], {}]

    def json_type(item: Any) -> str:
        if isinstance(item, bool):
            return "bool"
        if isinstance(item, int | float):
            return "number"
        return type(item).__name__

    own = json_type(value)
    return [c for c in candidates if json_type(c) != own and not (own == "number" and isinstance(c, int | float))]


def set_at(payload: dict[str, Any], path: FieldPath, value: Any) -> None:
    target: Any = payload
    for part in path[:-1]:
        target = target[part]
    target[path[-1]] = value


def drop_at(payload: dict[str, Any], path: FieldPath) -> None:
    target: Any = payload
    for part in path[:-1]:
        target = target[part]
    del target[path[-1]]
