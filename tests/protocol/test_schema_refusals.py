"""validate_submission refuses what the schema refuses, naming the field: every leaf of a full
submission replaced by values of the wrong kind, and every key removed or added."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import jsonschema
import pytest
from benchhub_protocol import schema

from tests.conftest import build_payload

WRONG_VALUES: tuple[Any, ...] = (True, False, None, 0, 1, 1.0, -1, 1.5, 2**53, "", "x", "A" * 300, [], {}, ["x"])


def _paths(node: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    yield path
    items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
    for key, value in items:
        yield from _paths(value, (*path, key))


def _replaced(payload: dict[str, Any], path: tuple[Any, ...], value: Any) -> dict[str, Any]:
    mutated = copy.deepcopy(payload)
    node: Any = mutated
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return mutated


def _mutations(payload: dict[str, Any]) -> Iterator[dict[str, Any]]:
    for path in _paths(payload):
        if not path:
            continue
        for value in WRONG_VALUES:
            yield _replaced(payload, path, value)
        parent: Any = payload
        for key in path[:-1]:
            parent = parent[key]
        if isinstance(parent, dict):
            dropped = copy.deepcopy(payload)
            node: Any = dropped
            for key in path[:-1]:
                node = node[key]
            del node[path[-1]]
            yield dropped
            yield _replaced(payload, (*path[:-1], f"{path[-1]}_extra"), 1)


@pytest.fixture(scope="module")
def payload() -> dict[str, Any]:
    tg = {"upstream": {1: [160.5, 161.5], 4: [148.25, 149.0]}, "01": {1: [160.0, 160.5], 4: [209.9, 210.1]}}
    return build_payload(tg=tg)


def test_it_refuses_every_mutation_jsonschema_refuses(payload: dict[str, Any]) -> None:
    reference = jsonschema.Draft202012Validator(schema.SUBMISSION_SCHEMA)
    checked = 0
    for mutated in _mutations(payload):
        if reference.is_valid(mutated):
            continue
        checked += 1
        with pytest.raises(schema.SchemaViolation):
            schema.validate_submission(mutated)
    assert checked > 500


def test_it_refuses_true_for_the_schema_version(payload: dict[str, Any]) -> None:
    mutated = _replaced(payload, ("schema_version",), True)
    with pytest.raises(schema.SchemaViolation) as refused:
        schema.validate_submission(mutated)
    assert refused.value.field == "schema_version"


def test_it_names_the_field_and_the_reason(payload: dict[str, Any]) -> None:
    mutated = _replaced(payload, ("sweep", "runs", 0, "rows", 0, "tg_tps"), "fast")
    with pytest.raises(schema.SchemaViolation) as refused:
        schema.validate_submission(mutated)
    assert refused.value.field == "sweep.runs[0].rows[0].tg_tps"
    assert "is not of type 'number'" in refused.value.detail
