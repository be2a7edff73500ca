"""Issue 25: the payload schema (shared by agent and server) bounds every number and refuses names
a page would show as something else, each refusal naming the field."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import pytest
from benchhub_protocol import schema

from tests.conftest import build_payload
from tests.reliability.payload_paths import dotted, set_at


def _numbers(node: Any, path: tuple[str | int, ...] = ()) -> Iterator[tuple[tuple[str | int, ...], Any]]:
    if isinstance(node, bool):
        return
    if isinstance(node, int | float):
        yield path, node
    items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
    for key, value in items:
        yield from _numbers(value, (*path, key))


def _refusal(payload: dict[str, Any]) -> schema.SchemaViolation:
    with pytest.raises(schema.SchemaViolation) as refused:
        schema.validate_submission(payload)
    return refused.value


def test_it_accepts_the_payload_the_tests_build() -> None:
    schema.validate_submission(build_payload())


@pytest.mark.parametrize("extreme", [5e-324, 1e300, -1e300])
def test_it_refuses_an_extreme_in_every_number_naming_the_field(extreme: float) -> None:
    template = build_payload()
    numbers = [path for path, _ in _numbers(template) if path[-1] != "repetition_score" or extreme != 5e-324]
    assert len(numbers) > 60
    misnamed = []
    for path in numbers:
        payload = copy.deepcopy(template)
        set_at(payload, path, extreme)
        field = _refusal(payload).field
        if field != dotted(path):
            misnamed.append((dotted(path), field))
    assert misnamed == []


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("tg_tps", 0.0009),
        ("tg_tps", 10_000_001),
        ("pp_tps", 0),
        ("t_tg_s", 0),
        ("t_pp_s", 1_000_001),
    ],
)
def test_it_refuses_a_rate_or_time_past_its_bounds(field: str, value: float) -> None:
    payload = build_payload()
    payload["sweep"]["runs"][1]["rows"][0][field] = value
    assert _refusal(payload).field == f"sweep.runs[1].rows[0].{field}"


@pytest.mark.parametrize(
    ("path", "value"),
    [
        (("machine", "chip"), "Apple \u202eM5 Pro"),  # right-to-left override
        (("machine", "gpu_name"), "Apple\u200dM5"),  # zero-width joiner
        (("model", "label"), "Qwen3 \x07"),  # a control character
        (("model", "file_name"), "a\u2028b.gguf"),  # line separator
        (("model", "file_type"), "\uff29\uff31\uff12_XXS"),  # fullwidth letters: not NFKC
        (("variants", 1, "name"), "\ufb01"),  # a ligature: not NFKC
        (("correctness", 0, "reason"), "ok\x00"),
        (("agent", "version"), "1.0\u2066"),  # left-to-right isolate
    ],
)
def test_it_refuses_a_name_with_a_control_or_bidi_character_or_not_nfkc(
    path: tuple[str | int, ...], value: str
) -> None:
    payload = build_payload()
    set_at(payload, path, value)
    assert _refusal(payload).field == dotted(path)


def test_it_refuses_a_key_that_is_not_a_clean_name() -> None:
    payload = build_payload()
    payload["model"]["tensor_bytes_by_type"]["Q4\u202e_K"] = 1
    assert _refusal(payload).field == "model.tensor_bytes_by_type"


def test_it_keeps_line_breaks_in_a_reason_and_accepts_non_latin_names() -> None:
    payload = build_payload(correctness={"01": "not_run"})
    payload["correctness"][0]["reason"] = "no backend to compare:\n\tCPU only"
    payload["model"]["label"] = "Qwen3 量化 Ünïcödé"
    schema.validate_submission(payload)
