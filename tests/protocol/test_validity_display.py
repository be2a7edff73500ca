"""Issue 35 point 7, in markdown.py's formatting: effects under 1% print with one decimal, no
"-0%", a range whose ends print the same prints once, and no verdict stands beside a zero."""

from __future__ import annotations

import pytest
from benchhub_protocol import markdown, stats


@pytest.mark.parametrize(
    ("speedup", "text"),
    [
        (1.42, "+42%"),
        (0.97, "−3%"),
        (1.003, "+0.3%"),
        (0.996, "−0.4%"),
        (1.0094, "+0.9%"),
        (1.0096, "+1%"),  # rounds to 1.0: a whole percent
        (0.9905, "−0.9%"),
        (1.0, "±0.0%"),
        (0.9996, "±0.0%"),  # never "−0.0%" or "-0%"
        (1.0004, "±0.0%"),
        (None, "–"),
    ],
)
def test_changes_under_one_percent_print_with_one_decimal(speedup: float | None, text: str) -> None:
    assert markdown.format_change(speedup) == text


def test_a_pair_reads_baseline_arrow_variant_and_the_change() -> None:
    assert markdown.format_pair(379.2, 380.7, 380.7 / 379.2) == "379.2→380.7 (+0.4%)"
    assert markdown.format_pair(148.0, 209.9, None) == "148.0→209.9 (+42%)"
    assert markdown.format_pair(None, None, None) == "–→– (–)"


@pytest.mark.parametrize(
    ("low", "high", "text"),
    [
        (1.37, 1.3701, "+37%"),
        (0.996, 1.02, "−0.4% to +2.0%"),
        (1.012, 1.05, "+1% to +5%"),
        (0.9999, 1.0001, "±0.0%"),
        (None, 1.1, "–"),
    ],
)
def test_an_interval_prints_at_one_precision_and_once_when_its_ends_agree(
    low: float | None, high: float | None, text: str
) -> None:
    assert markdown.format_interval(low, high) == text


@pytest.mark.parametrize("min_effect", [0.0, 0.0005, 0.02])
@pytest.mark.parametrize("speedup", [1.0004, 0.9996, 1.0009, 1.0011, 0.9989, 1.03])
def test_no_verdict_stands_beside_a_change_printed_as_zero(min_effect: float, speedup: float) -> None:
    tight = (speedup * 0.9999, speedup * 1.0001)
    verdict = stats.decide(speedup, *tight, min_effect)
    if verdict in ("faster", "slower"):
        assert markdown.format_change(speedup) not in ("±0.0%", "±0%")
