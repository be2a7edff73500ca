"""ranking.py is pure: the headline (geometric mean over BS 2–8, its bounds and interval kind), the
verdict in words, published lines beside crowd ones, and the sparkline."""

from __future__ import annotations

import math
import re

from benchhub.web.ranking import SpeedupPoint, headline, rank, ranking_rows, verdict_summary

from .test_leaderboard import Cell, Ref


def test_it_takes_the_geometric_mean_of_bs_2_to_8_only() -> None:
    points = [
        SpeedupPoint(1, 1.0),
        SpeedupPoint(2, 1.1),
        SpeedupPoint(4, 1.4),
        SpeedupPoint(8, 1.7),
        SpeedupPoint(16, 0.8),
    ]
    found = headline(points)
    assert found is not None
    assert math.isclose(found.speedup, (1.1 * 1.4 * 1.7) ** (1 / 3), rel_tol=1e-12)
    assert found.batch_sizes == (2, 4, 8)
    assert found.text == "+38%"


def test_it_calls_the_bounds_a_95_percent_ci_only_when_every_cell_has_one() -> None:
    ci = [SpeedupPoint(bs, 1.4, 1.3, 1.5, "95%", 7) for bs in (2, 4, 8)]
    found = headline(ci)
    assert found and found.interval == "95%" and found.n_machines == 7
    assert math.isclose(found.low or 0, 1.3) and math.isclose(found.high or 0, 1.5)
    assert found.note == "95% CI +30% to +50%, 7 machines"

    mixed = headline([*ci[:2], SpeedupPoint(8, 1.4, 1.2, 1.6, "range", 4)])
    assert mixed and mixed.interval == "range" and mixed.n_machines == 4
    assert mixed.note.startswith("range of 4 machines: ") and "95%" not in mixed.note

    single = headline([*ci[:2], SpeedupPoint(8, 1.4, None, None, None, 1)])
    assert single and (single.interval, single.low, single.high, single.note) == (None, None, None, "1 machine")


def test_it_has_no_headline_without_a_cell_at_bs_2_to_8() -> None:
    assert headline([SpeedupPoint(1, 1.0), SpeedupPoint(16, 0.8)]) is None


def test_it_words_the_verdict_of_bs_2_to_8() -> None:
    same = [
        Cell("Apple M4", 10, "IQ2_XXS", "01", bs, 100, 140, 1.4, 1.3, 1.5, n_submissions=7)._replace(verdict="faster")
        for bs in (2, 4)
    ]
    assert verdict_summary(same) == "faster"
    few = Cell("Apple M4", 10, "IQ2_XXS", "01", 8, 100, 140, 1.4, 1.3, 1.5, n_submissions=2)
    assert verdict_summary([*same, few]) == "faster at BS2, BS4; too few machines at BS8"


def test_it_ranks_crowd_and_published_lines_best_first() -> None:
    cells = [
        Cell("Apple M1", 8, "IQ2_XXS", "01", 4, 70, 80, 80 / 70, 1.1, 1.2, n_submissions=2),
        Cell("Apple M5 Pro", 20, "IQ2_XXS", "01", 4, 148, 200, 200 / 148, 1.3, 1.4, n_submissions=3),
        Cell("Apple M5 Pro", 20, "IQ2_XXS", "upstream", 4, 148, 148, 1.0),
        Cell("Apple M2", 10, "IQ2_XXS", "01", 16, 300, 240, 0.8),  # nothing at BS 2–8
    ]
    refs = [Ref("Apple M5 Pro", None, "M5 Pro 24GB", "Qwen3-1.7B UD-IQ2_XXS", "IQ2_XXS", "01", 4, 148.0, 209.9)]
    lines = rank(cells, refs, "01")
    assert [(line.chip, line.reference) for line in lines] == [
        ("Apple M5 Pro", True),
        ("Apple M5 Pro", False),
        ("Apple M1", False),
        ("Apple M2", False),
    ]
    assert lines[0].machines == "published" and lines[0].model == "Qwen3-1.7B UD-IQ2_XXS (M5 Pro 24GB)"
    assert lines[1].machines == "3 machines" and lines[3].headline is None


def test_it_says_when_a_headline_stands_on_fewer_batch_sizes() -> None:
    cells = [Cell("Apple M1", 8, "IQ2_XXS", "01", bs, 70, 80, 80 / 70) for bs in (2, 3, 4, 5, 8)]
    cells.append(Cell("Apple M4", 10, "IQ2_XXS", "01", 4, 70, 80, 80 / 70))
    by_chip = {line.chip: line for line in rank(cells, [], "01")}
    assert by_chip["Apple M1"].partial == ""
    assert by_chip["Apple M4"].partial == "over BS4 only"


def test_it_draws_a_sparkline_per_line_on_one_scale() -> None:
    cells = [Cell("Apple M1", 8, "IQ2_XXS", "01", bs, 100, 100 * s, s) for bs, s in ((1, 1.0), (4, 1.5), (16, 0.8))]
    [row] = ranking_rows(rank(cells, [], "01"), [1, 2, 3, 4, 5, 8, 9, 12, 16])
    svg = str(row.spark)
    assert svg.startswith('<svg class="spark"') and "<script" not in svg and "style=" not in svg  # CSP-safe
    assert 'aria-label="BS1 1.00×, BS4 1.50×, BS16 0.80×"' in svg
    points = re.search(r'<polyline points="([^"]+)"', svg)
    assert points
    ys = [float(pair.split(",")[1]) for pair in points.group(1).split()]
    assert ys[1] < ys[0] < ys[2], "higher speedup, higher on the line (smaller y)"
