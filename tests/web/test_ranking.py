"""ranking.py is pure: the headline (per machine the geometric mean over BS 2–8, stored with the
group's cells; published lines the geometric mean of their speedups), the verdict in words,
published lines beside crowd ones, and the sparkline."""

from __future__ import annotations

import math
import re
from dataclasses import replace

from benchhub.results.board import HeadlineRow
from benchhub.web.ranking import headline, rank, ranking_rows, verdict_summary

from .test_leaderboard import Cell, Ref, headline_row


def stored(
    chip: str, cores: int, speedup: float | None, interval: str | None = None, n: int = 1, **bounds: float
) -> HeadlineRow:
    where = {"chip": chip, "gpu_cores": cores, "model_sha256": "iq2_xxs" * 8, "batch_sizes": (2, 3, 4, 5, 8)}
    return headline_row(
        **where, speedup=speedup, interval=interval, ci_low=bounds.get("low"), ci_high=bounds.get("high"), n_machines=n
    )


def test_a_published_headline_is_the_geometric_mean_of_bs_2_to_8_only() -> None:
    found = headline([(1, 1.0), (2, 1.1), (4, 1.4), (8, 1.7), (16, 0.8)])
    assert found is not None
    assert math.isclose(found.speedup, (1.1 * 1.4 * 1.7) ** (1 / 3), rel_tol=1e-12)
    assert found.batch_sizes == (2, 4, 8)
    assert (found.text, found.interval) == ("+38%", None)
    assert headline([(1, 1.0), (16, 0.8)]) is None


def test_a_crowd_headline_says_what_its_interval_is() -> None:
    cells = [Cell("Apple M4", 10, "IQ2_XXS", "01", bs, 100, 140, 1.4) for bs in (2, 4)]
    ci = rank(cells, [stored("Apple M4", 10, 1.4, "95%", 7, low=1.3, high=1.5)], [], "01")[0].headline
    assert ci and ci.note == "95% interval for the typical machine: +30% to +50%, 7 machines"
    spread = rank(cells, [stored("Apple M4", 10, 1.4, "range", 4, low=1.2, high=1.6)], [], "01")[0].headline
    assert spread and spread.note.startswith("range of 4 machines: ") and "95%" not in spread.note
    single = rank(cells, [stored("Apple M4", 10, 1.4, None, 1)], [], "01")[0].headline
    assert single and single.note == "1 machine"
    assert rank(cells, [stored("Apple M4", 10, None, None, 0)], [], "01")[0].headline is None


def test_it_words_the_verdict_of_bs_2_to_8() -> None:
    same = [
        replace(Cell("Apple M4", 10, "IQ2_XXS", "01", bs, 100, 140, 1.4, 1.3, 1.5, n_submissions=7), verdict="faster")
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
    headlines = [stored("Apple M1", 8, 80 / 70, "range", 2), stored("Apple M5 Pro", 20, 200 / 148, "range", 3)]
    refs = [Ref("Apple M5 Pro", None, "M5 Pro 24GB", "Qwen3-1.7B UD-IQ2_XXS", "IQ2_XXS", "01", 4, 148.0, 209.9)]
    lines = rank(cells, headlines, refs, "01")
    # Crowd lines by evidence (here none has a verdict: more machines first), published ones after.
    assert [(line.chip, line.reference) for line in lines] == [
        ("Apple M5 Pro", False),
        ("Apple M1", False),
        ("Apple M2", False),
        ("Apple M5 Pro", True),
    ]
    assert lines[3].machines == "published" and lines[3].model == "Qwen3-1.7B UD-IQ2_XXS (M5 Pro 24GB)"
    assert lines[0].machines == "3 machines" and lines[2].headline is None


def test_it_says_when_a_published_headline_stands_on_fewer_batch_sizes() -> None:
    cells = [Cell("Apple M1", 8, "IQ2_XXS", "01", bs, 70, 80, 80 / 70) for bs in (2, 3, 4, 5, 8)]
    refs = [Ref("Apple M5 Pro", None, "M5 Pro 24GB", "Qwen3-1.7B UD-IQ2_XXS", "IQ2_XXS", "01", 4, 148.0, 209.9)]
    lines = rank(cells, [stored("Apple M1", 8, 80 / 70)], refs, "01")
    by_reference = {line.reference: line for line in lines}
    assert by_reference[False].partial == ""
    assert by_reference[True].partial == "over BS4 only"


def test_it_draws_a_sparkline_per_line_on_one_scale() -> None:
    cells = [Cell("Apple M1", 8, "IQ2_XXS", "01", bs, 100, 100 * s, s) for bs, s in ((1, 1.0), (4, 1.5), (16, 0.8))]
    [row] = ranking_rows(rank(cells, [], [], "01"), [1, 2, 3, 4, 5, 8, 9, 12, 16])
    svg = str(row.spark)
    assert svg.startswith('<svg class="spark"') and "<script" not in svg and "style=" not in svg  # CSP-safe
    assert 'aria-label="BS1 1.00×, BS4 1.50×, BS16 0.80×"' in svg
    points = re.search(r'<polyline points="([^"]+)"', svg)
    assert points
    ys = [float(pair.split(",")[1]) for pair in points.group(1).split()]
    assert ys[1] < ys[0] < ys[2], "higher speedup, higher on the line (smaller y)"
