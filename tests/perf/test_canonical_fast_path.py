"""The fast canonical serialisation is byte-identical to the RFC 8785 canonicaliser wherever it is
taken, and everything else still goes through the canonicaliser: generated JSON values of every
kind, the floats around the fixed-notation bounds, and the real submission payload."""

from __future__ import annotations

import math
from typing import Any

import pytest
import rfc8785
from benchhub_protocol import envelope
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.conftest import build_payload

FLOATS = st.floats(allow_nan=False, allow_infinity=False)
# Text including lone surrogates, control characters and characters beyond the BMP.
TEXT = st.text(st.characters(codec=None, categories=None), max_size=8) | st.sampled_from(
    ["", "a", "\x00", "\x1f", "\x7f", '"', "\\", "\u2028", "\ud800", "\U0001f600", "é", "\ue000"]
)
JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**53) + 1, 2**53 - 1)
    | FLOATS
    | st.floats(1e-5, 1e17, allow_nan=False)
    | TEXT,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(TEXT, children, max_size=4),
    max_leaves=24,
)
BOUNDARY_FLOATS = (
    1e-4, 9.999999999999999e-05, 0.00010000000000000002, 1e16, 9999999999999998.0, 9999999999999999.5,
    1e15 + 0.5, 0.1, 0.5, 1.5, 123.456, -0.001, 5e-324, 1.7976931348623157e308, 0.0, -0.0, 2.0, 1e21, 1e-7,
    4503599627370495.5, 0.30000000000000004,
)  # fmt: skip


def _same_as_the_canonicaliser(value: Any) -> None:
    try:
        expected = rfc8785.dumps(value)
    except (rfc8785.CanonicalizationError, ValueError, TypeError):
        with pytest.raises(envelope.EnvelopeError):
            envelope.canonical_bytes(value)
        return
    assert envelope.canonical_bytes(value) == expected


@settings(max_examples=3000, deadline=None)
@given(JSON)
def test_it_serialises_any_json_value_as_the_canonicaliser_does(value: Any) -> None:
    _same_as_the_canonicaliser({"value": value})


@pytest.mark.parametrize("number", BOUNDARY_FLOATS + tuple(-x for x in BOUNDARY_FLOATS))
def test_it_serialises_floats_at_the_notation_bounds_as_the_canonicaliser_does(number: float) -> None:
    assert math.isfinite(number)
    _same_as_the_canonicaliser({"x": number, "in": [number, {"y": number}]})


def test_it_takes_the_fast_path_for_a_real_submission(monkeypatch: pytest.MonkeyPatch) -> None:
    payload = build_payload()
    expected = rfc8785.dumps(payload)

    def not_called(value: Any) -> bytes:
        raise AssertionError("the canonicaliser ran for a plain payload")

    monkeypatch.setattr(rfc8785, "dumps", not_called)
    assert envelope.canonical_bytes(payload) == expected


def test_it_still_refuses_what_has_no_canonical_form() -> None:
    for bad in ({"x": math.nan}, {"x": math.inf}, {"x": 2**53}, {"x": [1, -(2**53)]}):
        with pytest.raises(envelope.EnvelopeError):
            envelope.canonical_bytes(bad)
