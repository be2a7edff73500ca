"""stats.py: the pure statistics of docs/protocol.md section 7, checked against hand computations and the
binomial distribution itself."""

from __future__ import annotations

import math

import pytest
from benchhub_protocol import stats


def test_it_takes_medians_of_odd_and_even_counts() -> None:
    assert stats.median([3, 1, 2]) == 2
    assert stats.median([4, 1, 3, 2]) == 2.5
    with pytest.raises(ValueError):
        stats.median([])


@pytest.mark.parametrize(("n", "ranks"), [(1, None), (5, None), (6, (1, 6)), (8, (1, 8)), (9, (2, 8)), (12, (3, 10))])
def test_it_picks_the_order_statistics_of_the_binomial_median_interval(n: int, ranks: tuple[int, int] | None) -> None:
    assert stats.median_interval_ranks(n) == ranks


@pytest.mark.parametrize("n", range(6, 120))
def test_its_interval_covers_at_least_95_percent_and_is_the_narrowest_that_does(n: int) -> None:
    low, high = stats.median_interval_ranks(n)  # type: ignore[misc]
    assert high == n - low + 1

    def miss(k: int) -> float:
        return 2 * sum(math.comb(n, i) for i in range(k)) / 2**n

    assert miss(low) <= 0.05
    assert low == n // 2 or miss(low + 1) > 0.05


def test_it_pairs_rounds_and_skips_rounds_without_both_builds() -> None:
    numbers = stats.paired({1: 150.0, 2: 200.0, 3: 100.0, 4: 999.0}, {1: 100.0, 2: 200.0, 3: 50.0, 5: 1.0})
    assert numbers == stats.PairedNumbers(n_rounds=3, tg_tps=150.0, baseline_tg_tps=100.0, speedup=1.5)
    assert stats.paired({1: 1.0}, {2: 1.0}) is None
    assert stats.paired({1: 1.0}, {1: 0.0}) is None, "a zero baseline pairs with nothing"


def row(machine: str, speedup: float, baseline: float = 100.0, contributor: str = "ada") -> stats.Row:
    return stats.Row(machine, contributor, speedup, baseline)


def test_it_takes_each_machines_median_then_the_median_over_machines() -> None:
    rows = [row("m0", 2.0) for _ in range(5)] + [row("m1", 1.1, contributor="bob"), row("m2", 1.2, contributor="bob")]
    cell = stats.cell_stats(rows)
    assert (cell.speedup, cell.n_machines, cell.n_submissions, cell.n_contributors) == (1.2, 3, 7, 2)
    assert (cell.interval, cell.ci_low, cell.ci_high, cell.verdict) == ("range", 1.1, 2.0, "too few machines")
    assert cell.tg_tps == pytest.approx(cell.baseline_tg_tps * cell.speedup)  # type: ignore[operator]


def test_it_calls_a_cell_faster_slower_or_unchanged_only_on_a_95_percent_interval() -> None:
    faster = stats.cell_stats([row(f"m{i}", 1.1 + i / 100) for i in range(6)])
    slower = stats.cell_stats([row(f"m{i}", 0.8 + i / 100) for i in range(6)])
    unclear = stats.cell_stats([row(f"m{i}", 0.97 + i / 100) for i in range(6)])
    assert [c.verdict for c in (faster, slower, unclear)] == ["faster", "slower", "no clear change"]
    assert faster.interval == "95%"


def test_it_gives_no_interval_for_one_machine_and_nothing_for_none() -> None:
    one = stats.cell_stats([row("m0", 1.5), row("m0", 1.7)])
    assert (one.speedup, one.interval, one.ci_low, one.ci_high, one.n_machines) == (1.6, None, None, None, 1)
    empty = stats.cell_stats([])
    assert (empty.speedup, empty.n_machines, empty.verdict) == (None, 0, "too few machines")


def test_it_leaves_out_values_that_are_not_finite_positive_numbers() -> None:
    cell = stats.cell_stats([row("m0", math.inf), row("m1", math.nan), row("m2", 1.5), row("m3", 1.5, baseline=0.0)])
    assert (cell.speedup, cell.n_machines) == (1.5, 1)


def test_a_headline_is_the_median_over_machines_of_each_machines_geometric_mean() -> None:
    machines = [
        {2: [1.2, 1.4], 4: [1.69]},  # medians 1.3 and 1.69: geometric mean 1.3 * 1.3**0.5... = sqrt(1.3 * 1.69)
        {2: [1.1], 4: [1.1]},
        {2: [2.0]},  # did not measure BS4: left out
    ]
    found = stats.headline_stats(machines, [2, 4])
    assert found.n_machines == 2
    assert found.speedup == pytest.approx((math.sqrt(1.3 * 1.69) + 1.1) / 2)
    assert (found.interval, found.ci_low, found.ci_high) == (
        "range",
        pytest.approx(1.1),
        pytest.approx(math.sqrt(1.3 * 1.69)),
    )
    assert stats.headline_stats([{2: [1.5]}], [2, 4]).speedup is None
