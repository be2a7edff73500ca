"""The pure statistics behind every leaderboard number."""

from __future__ import annotations

import math
from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from benchhub.results import stats


def test_it_takes_the_median_of_odd_and_even_counts() -> None:
    assert stats.median([3, 1, 2]) == 2
    assert stats.median([4, 1, 3, 2]) == 2.5
    with pytest.raises(ValueError):
        stats.median([])


def test_it_measures_spread_relative_to_the_median() -> None:
    assert stats.spread([100, 102]) == pytest.approx(2 / 101)
    assert stats.spread([5.0]) == 0


def test_it_pairs_speedups_and_refuses_a_zero_baseline() -> None:
    assert stats.paired_speedup(240.1, 146.0) == pytest.approx(1.6445, rel=1e-4)
    assert stats.paired_speedup(1.0, 0.0) is None


@pytest.mark.parametrize(
    ("n", "ranks"),
    [(1, (1, 1)), (2, (1, 2)), (5, (1, 5)), (6, (1, 6)), (9, (2, 8)), (10, (2, 9)), (20, (6, 15)), (100, (40, 61))],
)
def test_it_picks_the_order_statistics_of_the_binomial_median_interval(n: int, ranks: tuple[int, int]) -> None:
    assert stats.median_interval_ranks(n) == ranks


def test_it_covers_at_least_95_percent_wherever_that_is_possible() -> None:
    for n in range(6, 60):
        low, _ = stats.median_interval_ranks(n)
        coverage = 1 - 2 * sum(math.comb(n, i) for i in range(low)) / 2**n
        assert coverage >= 0.95
        tighter = 1 - 2 * sum(math.comb(n, i) for i in range(low + 1)) / 2**n
        assert tighter < 0.95


def test_it_gives_a_single_submission_a_point_interval() -> None:
    assert stats.median_interval([1.42]) == (1.42, 1.42)


def test_it_aggregates_medians_and_counts_contributors() -> None:
    samples = stats.CellSamples(
        tg_tps=[210, 90, 200],
        baseline_tg_tps=[148, 71.5, 137],
        speedup=[210 / 148, 90 / 71.5, 200 / 137],
        contributors=[1, 2, 1],
    )
    cell = stats.aggregate(samples)
    assert cell is not None
    assert cell.tg_tps == 200 and cell.baseline_tg_tps == 137
    assert cell.speedup == pytest.approx(210 / 148), "the median of the paired ratios, not a ratio of medians"
    assert (cell.ci_low, cell.ci_high) == (pytest.approx(90 / 71.5), pytest.approx(200 / 137))
    assert (cell.n_submissions, cell.n_contributors) == (3, 2)
    assert stats.aggregate(stats.CellSamples([], [], [], [])) is None


def _neighbours(stored: list[stats.Ranked], move: stats.Move) -> list[stats.Ranked]:
    """What the database returns for a move: up to |steps| stored elements next to its start."""
    ordered = sorted(stored)
    at = ordered.index(move.start)
    if move.steps > 0:
        return ordered[at + 1 : at + 1 + move.steps]
    return list(reversed(ordered[max(0, at + move.steps) : at]))


def _merged_state(stored: list[stats.Ranked], added: list[stats.Ranked]) -> dict[str, list[stats.Ranked]]:
    """stats.moves + stats.resolve over plain lists, the way cells.py runs them over indexes."""
    state = stats.order_state({column: stored for column in stats.COLUMNS}) if stored else {}
    result = {}
    for column in stats.COLUMNS:
        steps = stats.moves(len(stored), state.get(column, []), column, sorted(added))
        result[column] = [
            stats.resolve(step, _neighbours(stored, step), sorted(added)) if isinstance(step, stats.Move) else step
            for step in steps
        ]
    return result


# Few distinct values, so that ties (the baseline's speedup is 1.0 in every submission) are common.
values = st.sampled_from([0.5, 1.0, 1.0, 1.25, 1.5, 2.0, 3.0])


@settings(max_examples=400, deadline=None)
@given(st.lists(values, max_size=60), st.lists(values, min_size=1, max_size=25))
def test_it_steps_the_tracked_elements_to_the_ranks_a_full_sort_gives(old: list[float], new: list[float]) -> None:
    keys = iter(f"{index:04d}" for index in range(len(old) + len(new)))
    stored = [(value, next(keys)) for value in old]
    added = [(value, next(keys)) for value in new]
    assert _merged_state(stored, added) == stats.order_state({column: stored + added for column in stats.COLUMNS})


@settings(max_examples=200, deadline=None)
@given(st.lists(values, min_size=1, max_size=60), st.lists(values, min_size=1, max_size=25))
def test_it_gives_the_same_statistics_as_the_full_aggregate(old: list[float], new: list[float]) -> None:
    keys = iter(f"{index:04d}" for index in range(len(old) + len(new)))
    stored = [(value, next(keys)) for value in old]
    added = [(value, next(keys)) for value in new]
    everything = old + new
    expected = stats.aggregate(stats.CellSamples(everything, everything, everything, [1] * len(everything)))
    assert stats.cell_stats(len(everything), _merged_state(stored, added), 1) == expected


def test_it_refuses_to_step_past_elements_that_are_not_there() -> None:
    move = stats.Move(start=(1.0, "a"), steps=3)
    with pytest.raises(stats.StaleState):
        stats.resolve(move, [(1.5, "b")], [(2.0, "c")])
    assert stats.resolve(move, [(1.5, "b"), (4.0, "d")], [(2.0, "c")]) == (4.0, "d")


def test_it_finds_the_same_interval_ranks_in_floating_point_as_with_exact_integers() -> None:
    sizes = [*range(stats.EXACT_UP_TO - 5, 2500), 5000, 5952, 6000, 6001, 10_007, 20_001]
    for n in sizes:
        low = stats._exact_low_rank(n, 1 - stats.CONFIDENCE)
        assert stats.median_interval_ranks(n) == (low, n - low + 1), n


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.lists(values, min_size=1, max_size=8), min_size=1, max_size=12),
    st.integers(min_value=0, max_value=2),
)
def test_a_band_holds_the_stretch_it_names_through_any_arrivals(batches: list[list[float]], margin: int) -> None:
    """band_with keeps a band exactly the stored elements between its ends (below of them before,
    above after); where band_holds says it serves the tracked ranks it holds every tracked element,
    and where it says not, a fresh band does."""
    keys = iter(f"{index:04d}" for index in range(1000))
    stored: list[stats.Ranked] = []
    band: stats.Band | None = None
    kept: list[stats.Ranked] = []
    with mock.patch.object(stats, "BAND_MIN_MARGIN", margin):
        for batch in batches:
            added = sorted((value, next(keys)) for value in batch)
            if band is None:
                band, kept = stats.band_of(sorted(added), stats.tracked_ranks(len(added))["speedup"])
            else:
                band, taken = stats.band_with(band, added)
                kept = sorted(kept + taken)
            stored += added
            ordered, n = sorted(stored), len(stored)
            assert kept == ordered[band.below : n - band.above]
            assert (kept[0], kept[-1]) == (band.lo, band.hi)
            ranks = stats.tracked_ranks(n)["speedup"]
            if not stats.band_holds(band, n, ranks):
                band, kept = stats.band_of(ordered, ranks)
                assert stats.band_holds(band, n, ranks)
            assert all(ordered[rank - 1] in kept for rank in ranks)
            assert n - band.below - band.above <= 2 * min(n, max(ranks) - min(ranks) + 1 + 2 * stats.band_margin(n))
