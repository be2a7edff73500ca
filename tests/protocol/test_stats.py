"""stats.py: the pure statistics of docs/protocol.md section 7 (cells version 4), checked against closed
forms and hand computations. The simulation of their error rates is tests/protocol/test_validity.py."""

from __future__ import annotations

import math
import statistics

import pytest
from benchhub_protocol import cycles, meta, stats, words


def test_it_takes_medians_of_odd_and_even_counts() -> None:
    assert stats.median([3, 1, 2]) == 2
    assert stats.median([4, 1, 3, 2]) == 2.5
    with pytest.raises(ValueError):
        stats.median([])


def test_it_pairs_rounds_and_skips_rounds_without_both_builds() -> None:
    numbers = stats.paired({1: 150.0, 2: 200.0, 3: 100.0, 4: 999.0}, {1: 100.0, 2: 200.0, 3: 50.0, 5: 1.0})
    assert numbers == stats.PairedNumbers(n_rounds=3, tg_tps=150.0, baseline_tg_tps=100.0, speedup=1.5)
    assert stats.paired({1: 1.0}, {2: 1.0}) is None
    assert stats.paired({1: 1.0}, {1: 0.0}) is None, "a zero baseline pairs with nothing"


@pytest.mark.parametrize("p", [0.6, 0.9, 0.975, 0.99875, 0.9999])
def test_its_t_quantiles_match_the_closed_forms_of_one_and_two_degrees_of_freedom(p: float) -> None:
    assert stats.t_quantile(p, 1) == pytest.approx(math.tan(math.pi * (p - 0.5)), rel=1e-10)
    assert stats.t_quantile(p, 2) == pytest.approx((2 * p - 1) * math.sqrt(2 / (4 * p * (1 - p))), rel=1e-10)


@pytest.mark.parametrize(
    ("p", "df", "expected"), [(0.975, 7, 2.364624252), (0.975, 30, 2.042272456), (0.9, 5, 1.475884049)]
)
def test_its_t_quantiles_match_the_tables(p: float, df: int, expected: float) -> None:
    assert stats.t_quantile(p, df) == pytest.approx(expected, rel=1e-9)
    assert stats.t_quantile(0.975, 100_000) == pytest.approx(statistics.NormalDist().inv_cdf(0.975), rel=1e-4)


def row(
    machine: str, speedup: float, baseline: float = 100.0, contributor: str = "ada", se: float = 0.01, cycles: int = 4
) -> stats.Row:
    return stats.Row(machine, contributor, speedup, baseline, se, cycles - 1, cycles)


def one_cell(rows: list[stats.Row], min_effect: float = 0.02) -> stats.CellStats:
    return stats.page_stats({("01", "c0", 1): rows}, headline_sizes=[2], min_effect=min_effect).cells[("01", "c0", 1)]


def test_a_machine_is_a_key_and_a_cell_combines_machines_as_studies() -> None:
    rows = [row("k0", 2.0) for _ in range(5)] + [row("k1", 1.1, contributor="bob"), row("k2", 1.2, contributor="bob")]
    cell = one_cell(rows)
    assert (cell.n_machines, cell.n_submissions, cell.n_contributors) == (3, 7, 2)
    machines = [
        meta.machine([meta.Submitted(math.log(r.speedup), r.log_se, r.df, r.n_cycles) for r in group])
        for group in (rows[:5], rows[5:6], rows[6:])
    ]
    assert cell.speedup == pytest.approx(math.exp(meta.pool(machines).mean))
    assert cell.tg_tps == pytest.approx(cell.baseline_tg_tps * cell.speedup)  # type: ignore[operator]
    assert cell.tau is not None and cell.tau > 0.1 and cell.i2 is not None and cell.i2 > 0.9


def test_equal_machines_of_equal_precision_give_the_mean_of_logs_and_a_hartung_knapp_interval() -> None:
    values = [1.01, 1.04, 1.02, 1.06, 1.03]
    logs = [math.log(v) for v in values]
    mean, sd = statistics.fmean(logs), statistics.stdev(logs)
    cells = {("01", "c0", size): [row(f"k{i}", v, se=0.001) for i, v in enumerate(values)] for size in (1, 2)}
    page = stats.page_stats(cells, headline_sizes=[2], min_effect=0.02)
    cell = page.cells[("01", "c0", 1)]
    assert cell.speedup == pytest.approx(math.exp(mean))
    # Equal weights (tau^2 dwarfs the within variances): the Hartung-Knapp interval is the t interval
    # of the mean log, here at 1 - 0.05 / 3 (two cells and one headline on the page).
    half = stats.t_quantile(1 - 0.05 / 6, 4) * sd / math.sqrt(5)
    assert (cell.ci_low, cell.ci_high) == (pytest.approx(math.exp(mean - half)), pytest.approx(math.exp(mean + half)))
    assert cell.interval == "95%, page-wise" and cell.predict_level == 0.8
    # One more machine running 3 cycles: tau^2 (here sd^2 - v by DerSimonian-Laird), its own noise at
    # 3 cycles (the machines' per-cycle variance scaled from their 4), and the mean's variance.
    v = 0.001**2
    variance = sd**2 - v + v * cycles.information(4) / cycles.information(3) + sd**2 / 5
    spread = statistics.NormalDist().inv_cdf(0.9) * math.sqrt(variance)
    assert (cell.predict_low, cell.predict_high) == (
        pytest.approx(math.exp(mean - spread)),
        pytest.approx(math.exp(mean + spread)),
    )
    alone = one_cell([row(f"k{i}", v, se=0.001) for i, v in enumerate(values)])
    assert alone.ci_low > cell.ci_low, "one interval on a page needs less adjustment than three"  # type: ignore[operator]


def test_a_precise_machine_weighs_more_than_a_noisy_one() -> None:
    precise = [row("k0", 1.10, se=0.002, cycles=10), row("k1", 1.10, se=0.002, cycles=10)]
    noisy = [row("k2", 1.00, se=0.05, cycles=1), row("k3", 1.20, se=0.05, cycles=1)]
    cell = one_cell(precise + noisy + [row("k4", 1.30, se=0.06, cycles=1)])
    assert cell.speedup is not None and abs(cell.speedup - 1.10) < abs(
        math.exp(statistics.fmean(math.log(v) for v in (1.1, 1.1, 1.0, 1.2, 1.3))) - 1.10
    )


@pytest.mark.parametrize(
    ("speedup", "low", "high", "expected"),
    [
        (1.05, 1.011, 1.09, "faster"),
        (1.05, 1.005, 1.09, "unclear"),  # clear of no change, not of half the smallest effect
        (1.015, 1.001, 1.03, "unclear"),  # a clear gain, but the estimate is under the smallest effect
        (1.015, 1.001, 1.019, "within"),
        (0.95, 0.90, 0.989, "slower"),
        (1.0, 0.985, 1.02, "within"),
        (1.0, 0.97, 1.03, "unclear"),
        (1.05, 0.99, 1.1, "unclear"),
    ],
)
def test_its_verdicts_follow_the_interval_and_the_smallest_effect(
    speedup: float, low: float, high: float, expected: str
) -> None:
    assert stats.decide(speedup, low, high, 0.02) == expected


def test_within_needs_the_prediction_inside_and_faster_needs_machines_that_agree() -> None:
    assert stats.decide(1.0, 0.99, 1.01, 0.02, predict=(0.985, 1.015)) == "within"
    assert stats.decide(1.0, 0.99, 1.01, 0.02, predict=(0.97, 1.015)) == "unclear"
    assert stats.decide(1.05, 1.02, 1.08, 0.02, predict=(0.99, 1.11)) == "faster"
    assert stats.decide(1.05, 1.02, 1.08, 0.02, predict=(0.97, 1.13)) == "unclear"
    assert stats.decide(1.05, 1.02, 1.08, 0.02, predict=(0.97, 1.13), varies=True) == "varies by machine"


def test_machines_split_in_two_read_varies_by_machine() -> None:
    rows = [row(f"k{i}", 1.04 if i % 2 else 0.96, se=0.003) for i in range(20)]
    cell = one_cell(rows)
    assert cell.verdict == "varies by machine"
    assert cell.predict_low < 0.98 and cell.predict_high > 1.02  # type: ignore[operator]
    assert cell.tau == pytest.approx(0.04, rel=0.1)


def test_a_verdict_needs_an_effect_that_prints_even_when_the_campaign_asks_for_none() -> None:
    assert stats.decide(1.0004, 1.0001, 1.0007, 0.0) == "within"
    assert stats.decide(1.002, 1.001, 1.003, 0.0) == "faster"


def test_below_three_machines_there_is_no_interval_and_no_verdict() -> None:
    two = one_cell([row("k0", 1.5), row("k0", 1.7), row("k1", 1.6)])
    assert (two.interval, two.ci_low, two.predict_low, two.tau, two.verdict, two.n_machines) == (
        None,
        None,
        None,
        None,
        "too few machines",
        2,
    )
    assert two.speedup == pytest.approx(math.sqrt(math.sqrt(1.5 * 1.7) * 1.6), rel=1e-3)  # still shown
    empty = one_cell([])
    assert (empty.speedup, empty.n_machines, empty.verdict) == (None, 0, "too few machines")


def test_it_leaves_out_values_that_are_not_finite_positive_numbers() -> None:
    cell = one_cell(
        [
            row("k0", math.inf),
            row("k1", math.nan),
            row("k2", 1.5),
            row("k3", 1.5, baseline=0.0),
            row("k4", 2, se=math.nan),
        ]
    )
    assert (cell.speedup, cell.n_machines) == (1.5, 1)


def test_a_headline_is_each_complete_machines_geometric_mean_over_the_headline_sizes() -> None:
    cells = {
        ("01", "c0", 2): [row("k0", 1.2), row("k0", 1.4), row("k1", 1.1), row("k2", 2.0), row("k3", 1.0)],
        ("01", "c0", 4): [row("k0", 1.69), row("k1", 1.1), row("k3", 1.0)],  # k2 did not measure BS4
    }
    headline = stats.page_stats(cells, headline_sizes=[2, 4], min_effect=0.02).headlines[("01", "c0")]
    values = [math.sqrt(1.3 * 1.69), 1.1, 1.0]
    assert headline.n_machines == 3
    # Equal precision: the machines' values at equal weight (their spread dwarfs their noise).
    assert headline.speedup == pytest.approx(math.prod(values) ** (1 / 3), rel=1e-3)
    assert headline.interval == "95%, page-wise"


def test_identical_machines_give_exactly_their_value_and_an_interval_from_their_precision() -> None:
    cell = one_cell([row(f"k{i}", 1.0, se=0.0) for i in range(4)])
    assert cell.speedup == 1.0 and cell.tau == 0.0 and cell.verdict == "within"
    assert 0.99 < cell.ci_low < 1.0 < cell.ci_high < 1.01  # type: ignore[operator]


def test_verdict_labels_name_the_threshold() -> None:
    assert stats.verdict_label("within", 0.02) == "within ±2%"
    assert stats.verdict_label("within", 0.015) == "within ±1.5%"
    assert [stats.verdict_label(v, 0.02) for v in stats.VERDICTS if v != "within"] == [
        "faster",
        "slower",
        "varies by machine",
        "unclear",
        "too few machines",
    ]


def headline(verdict: str, low: float | None, n: int = 8) -> stats.HeadlineStats:
    return stats.HeadlineStats(1.0, None, low, None, None, None, None, None, None, verdict, n)


def test_the_ranking_orders_by_verdict_then_by_the_guaranteed_bound_not_the_estimate() -> None:
    lines = {
        "big but unclear": stats.HeadlineStats(
            1.4, "95%, page-wise", 0.9, 2.0, None, None, None, 0.0, 0.0, "unclear", 3
        ),
        "split": headline("varies by machine", 0.95),
        "small but sure": headline("faster", 1.03),
        "surer": headline("faster", 1.05),
        "flat": headline("within", 0.99),
        "slower": headline("slower", 0.8),
        "one machine": stats.HeadlineStats(3.0, None, None, None, None, None, None, None, None, "too few machines", 1),
    }
    order = sorted(lines, key=lambda name: stats.evidence_key(lines[name]))
    assert order == ["surer", "small but sure", "big but unclear", "split", "flat", "slower", "one machine"]


def test_the_about_text_is_five_sentences_and_uses_every_word() -> None:
    text = words.ABOUT_VERDICTS
    assert text.count(". ") + 1 == 5 and text.endswith(".")
    for word in ("faster", "slower", "varies by machine", "within ±2%", "unclear", "too few machines", "95% page-wise"):
        assert word in text
