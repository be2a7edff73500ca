"""The compiled fast path of the payload schema (schema._compiled, fastjsonschema) may only ever say
"valid" where jsonschema, the rule, says so too: it answers the common case, and everything it
refuses is judged again by jsonschema. Held to that on thousands of seeded mutations of real payloads:
every leaf replaced by a value of another type or at a boundary, keys removed and added."""

from __future__ import annotations

import copy
import random
from collections.abc import Iterator
from typing import Any

import fastjsonschema
import pytest
from benchhub_protocol import schema

from tests.conftest import build_payload, vector_payload

ODD_VALUES: list[Any] = [
    True, False, None, 0, -1, 1, 1.0, 1.5, -0.0, 2**53, 2**63, 1e308, float("inf"), "", "x", "x" * 5000,
    "A\u202eB", "e\u0301", "\x00", "a\n", [], [1], {}, {"a": 1}, "2026-13-40T99:99:99Z", "metal", "pass",
]  # fmt: skip


def leaves(node: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    yield path
    if isinstance(node, dict):
        for key, value in node.items():
            yield from leaves(value, (*path, key))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from leaves(value, (*path, index))


def replaced(payload: dict[str, Any], path: tuple[Any, ...], value: Any) -> dict[str, Any]:
    mutated = copy.deepcopy(payload)
    node = mutated
    for part in path[:-1]:
        node = node[part]
    node[path[-1]] = value
    return mutated


def removed(payload: dict[str, Any], path: tuple[Any, ...]) -> dict[str, Any]:
    mutated = copy.deepcopy(payload)
    node = mutated
    for part in path[:-1]:
        node = node[part]
    del node[path[-1]]
    return mutated


def mutations(payload: dict[str, Any], rng: random.Random, count: int) -> Iterator[dict[str, Any]]:
    paths = [path for path in leaves(payload) if path]
    for _ in range(count):
        path = rng.choice(paths)
        roll = rng.random()
        if roll < 0.1 and isinstance(path[-1], str):
            yield removed(payload, path)
        elif roll < 0.2:
            parent = path[:-1]
            target = payload
            for part in parent:
                target = target[part]
            if isinstance(target, dict):
                yield replaced(payload, (*parent, "unknown_field"), 1)
                continue
            yield replaced(payload, path, rng.choice(ODD_VALUES))
        else:
            yield replaced(payload, path, rng.choice(ODD_VALUES))


def reference_accepts(obj: Any) -> bool:
    return not list(schema._validator("submission").iter_errors(obj))


def test_the_service_has_the_fast_path() -> None:
    assert schema._compiled("submission") is not None and fastjsonschema is not None


@pytest.mark.parametrize("seed", range(4))
def test_the_fast_path_never_accepts_what_jsonschema_refuses(seed: int) -> None:
    rng = random.Random(seed)
    fast = schema._compiled("submission")
    assert fast is not None
    bases = [vector_payload(), build_payload(), build_payload(model={"label": "Qwen3 8B"})]
    accepted_by_both = refused_by_both = 0
    for base in bases:
        assert reference_accepts(base)
        fast(base)  # a valid payload takes the fast path
        for mutated in mutations(base, rng, 600):
            try:
                fast(mutated)
                fast_accepts = True
            except Exception:  # any refusal of the fast path goes to jsonschema
                fast_accepts = False
            reference = reference_accepts(mutated)
            assert reference or not fast_accepts, f"fast path accepted what jsonschema refuses: {mutated}"
            accepted_by_both += fast_accepts and reference
            refused_by_both += not fast_accepts and not reference
    # The corpus reaches both sides: mutations that stay valid and mutations that do not.
    assert accepted_by_both > 50 and refused_by_both > 500


def test_a_refusal_names_the_field_as_jsonschema_does() -> None:
    payload = build_payload()
    payload["sweep"]["runs"][0]["rows"][0]["tg_tps"] = True
    with pytest.raises(schema.SchemaViolation) as refused:
        schema.validate_submission(payload)
    assert refused.value.field == "sweep.runs[0].rows[0].tg_tps"
