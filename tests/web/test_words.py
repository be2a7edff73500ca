"""The words and numbers of cells v3 (docs/protocol.md section 7; issue 35 points 1, 4, 6, 7): pure."""

from __future__ import annotations

from dataclasses import replace

import pytest

from benchhub.results.board import HeadlineRow
from benchhub.web import words
from benchhub.web.leaderboard import cell_view
from benchhub.web.ranking import rank

from .test_leaderboard import Cell, headline_row


@pytest.mark.parametrize(
    ("speedup", "text"),
    [
        (1.0, "±0.0%"),
        (1.004, "+0.4%"),  # under 1%: one decimal, never "+0%"
        (0.996, "−0.4%"),
        (0.9996, "±0.0%"),  # rounds to zero: no "-0%"
        (1.0096, "+1%"),
        (1.42, "+42%"),
        (0.8, "−20%"),
        (None, "–"),
    ],
)
def test_an_effect_under_one_percent_has_one_decimal_and_zero_has_no_sign(speedup: float | None, text: str) -> None:
    assert words.format_change(speedup) == text


def test_a_verdict_never_stands_beside_an_effect_printed_as_zero() -> None:
    assert words.effect_text(1.0004, "faster") == "+0.04%"
    assert words.effect_text(0.9996, "within") == "−0.04%"
    assert words.effect_text(1.0, "within") == "±0.0%"  # exactly no change
    assert words.effect_text(1.0004) == "±0.0%"  # no verdict beside it


def test_a_range_whose_ends_print_equal_prints_once() -> None:
    assert words.format_interval(1.371, 1.374) == "+37%"
    assert words.format_interval(1.03, 1.09) == "+3% to +9%"
    assert words.format_interval(0.999, 1.0001) == "−0.1% to ±0.0%"


def test_within_is_written_from_the_campaigns_threshold() -> None:
    assert words.verdict_label("within", 0.02) == "within ±2%"
    assert words.verdict_label("within", 0.015) == "within ±1.5%"
    assert words.verdict_label("faster", 0.02) == "faster"
    assert "at least 2%" in words.threshold_note(0.02) and "within ±2%" in words.threshold_note(0.02)


def test_a_cell_labels_its_interval_its_prediction_and_its_pending_machines() -> None:
    cell = replace(
        Cell("Apple M4", 10, "IQ2_XXS", "01", 4, 100, 106, 1.06, 1.03, 1.09, n_submissions=8),
        interval="95%, page-wise",
        verdict="within",
        predict_low=1.01,
        predict_high=1.11,
        predict_level=0.8,
        n_pending=2,
    )
    view = cell_view(cell, 4)
    assert view.text == "100.0→106.0 (+6%)"
    # Two short lines under the number; the sentences once, in the cell's tooltip.
    assert view.details == ("+3…+9 · n=8", "≈ within ±2%", "2 machines pending")
    assert view.full.splitlines() == [
        "95%, page-wise interval for the typical machine: +3% to +9%, 8 machines",
        "what your Mac will likely see: 80% of machines +1% to +11%",
        "within ±2%",
        "8 submissions, 1 contributor",
        "2 machines pending",
    ]
    ranged = cell_view(replace(cell, interval="range", predict_low=None, predict_high=None), 4)
    assert ranged.details[0] == "range +3…+9 · n=8" and "95%" not in ranged.full
    assert ranged.full.startswith("range of 8 machines: +3% to +9%")
    waiting = cell_view(replace(cell, n_machines=0, n_pending=1), 4)
    assert (waiting.text, waiting.details[0]) == ("pending", "1 machine pending")


def test_a_cell_whose_machines_disagree_says_so_and_how_much() -> None:
    cell = replace(
        Cell("Apple M4", 10, "IQ2_XXS", "01", 4, 100, 100.5, 1.005, 0.98, 1.03, n_submissions=20),
        interval="95%, page-wise",
        verdict="varies by machine",
        predict_low=0.95,
        predict_high=1.06,
        predict_level=0.8,
        tau=0.0392,
        i2=0.87,
    )
    view = cell_view(cell, 4)
    assert view.details[1] == "↕ varies"
    assert view.full.splitlines()[1:3] == [
        "what your Mac will likely see: 80% of machines −5% to +6% (machines differ by ±4.0%, I² 87%)",
        "varies by machine",
    ]
    assert "varies by machine" in words.threshold_note(0.02)


def headline(chip: str, speedup: float, low: float, high: float, verdict: str, n: int) -> HeadlineRow:
    where = {"chip": chip, "gpu_cores": 10, "model_sha256": "a" * 64, "batch_sizes": (2, 4, 8)}
    return headline_row(
        **where, speedup=speedup, interval="95%, page-wise", ci_low=low, ci_high=high, n_machines=n, verdict=verdict
    )


def test_the_ranking_orders_by_evidence_not_by_the_point_estimate() -> None:
    chips = ("Apple M1", "Apple M2", "Apple M3", "Apple M4")
    cells = [replace(Cell(chip, 10, "IQ2_XXS", "01", 4, 100, 110, 1.1), model_sha256="a" * 64) for chip in chips]
    headlines = [
        headline("Apple M1", 1.30, 0.90, 1.70, "unclear", 3),  # the largest estimate, on little evidence
        headline("Apple M2", 1.06, 1.04, 1.08, "faster", 12),
        headline("Apple M3", 1.10, 1.03, 1.17, "faster", 8),
        headline("Apple M4", 1.00, 0.99, 1.01, "within", 20),
    ]
    lines = rank(cells, headlines, [], "01")
    assert [line.chip for line in lines] == ["Apple M2", "Apple M3", "Apple M1", "Apple M4"]
    assert [line.verdict for line in lines] == ["faster", "faster", "unclear", "within ±2%"]
    assert [line.machines for line in lines] == ["1 machine"] * 4  # without counted keys: the most of one cell
    assert [bool(line.headline and line.headline.established) for line in lines] == [True, True, False, False]


def test_a_control_line_is_flagged_and_says_which_backend_the_patches_do_not_touch() -> None:
    cell = replace(Cell("NVIDIA H200", None, "IQ2_XXS", "01", 4, 100, 99, 0.99), backend="cuda", control=True)
    [line] = rank([cell], [], [], "01")
    assert line.control and line.control_label == "control: the patches do not touch CUDA"


def test_models_that_share_a_display_name_are_told_apart_by_a_short_sha() -> None:
    names = words.model_names([("Qwen3", "a" * 64), ("Qwen3", "b" * 64), ("Llama", "c" * 64)])
    assert names == {"a" * 64: "Qwen3 · sha256 aaaaaaaa", "b" * 64: "Qwen3 · sha256 bbbbbbbb", "c" * 64: "Llama"}


def test_a_compact_interval_is_its_two_ends_once_each() -> None:
    assert words.compact_interval("95%, page-wise", 1.10, 1.13, 3) == "+10…+13 · n=3"
    assert words.compact_interval("95%, page-wise", 0.97, 1.04) == "−3…+4"
    assert words.compact_interval("95%, page-wise", 1.0004, 1.0004, 5) == "±0.0 · n=5"
    assert words.compact_interval(None, None, None, 2) == "n=2"
    legend = words.legend(0.02)
    assert "▲ faster" in legend and "≈ within ±2%" in legend and "· too few machines" in legend
