"""leaderboard.py is pure: grouping, the agent's `148.0→209.9 (+42%)` form, amortisation, coverage."""

from dataclasses import dataclass
from typing import Any

import pytest

from benchhub.results.board import CellRow, HeadlineRow
from benchhub.web import leaderboard
from benchhub.web import series as chart_series


def Cell(
    chip: str,
    gpu_cores: int | None,
    quant: str,
    variant: str,
    batch_size: int,
    baseline_tg_tps: float | None,
    tg_tps: float | None,
    speedup: float | None,
    ci_low: float | None = None,
    ci_high: float | None = None,
    n_submissions: int = 1,
    n_contributors: int = 1,
    n_excluded_correctness: int = 0,
    n_excluded_degenerate: int = 0,
) -> CellRow:
    """A cell of one machine per submission, of the model file named by its quant."""
    n_machines = n_submissions
    interval = "95%" if n_machines >= 6 else "range" if n_machines >= 2 else None
    return row(
        chip=chip,
        gpu_cores=gpu_cores,
        model=f"model {quant}",
        model_sha256=quant.lower() * 8,
        quant=quant,
        variant=variant,
        batch_size=batch_size,
        baseline_tg_tps=baseline_tg_tps,
        tg_tps=tg_tps,
        speedup=speedup,
        interval=interval,
        ci_low=ci_low if interval else None,
        ci_high=ci_high if interval else None,
        n_machines=n_machines,
        n_submissions=n_submissions,
        n_contributors=n_contributors,
        excluded=EXCLUDED | {"correctness_failed": n_excluded_correctness, "degenerate_output": n_excluded_degenerate},
    )


EXCLUDED = {"hidden": 0, "correctness_failed": 0, "correctness_not_run": 0, "degenerate_output": 0, "run_state": 0}
# A cell's fields where a test names none: no interval, no prediction, "too few machines".
UNSTATED: dict[str, Any] = {
    "commit": "",
    "baseline_tg_tps": None,
    "tg_tps": None,
    "speedup": None,
    "interval": None,
    "ci_low": None,
    "ci_high": None,
    "n_contributors": 1,
    "predict_low": None,
    "predict_high": None,
    "predict_level": None,
    "tau": None,
    "i2": None,
    "verdict": "too few machines",
    "min_effect": 0.02,
    "campaign_version": 1,
    "superseded": False,
    "n_pending": 0,
    "excluded": EXCLUDED,
    "backend": "",
    "control": False,
}


def row(**fields: Any) -> CellRow:
    """A CellRow from the fields a test names, the others as UNSTATED says."""
    return CellRow(**(UNSTATED | fields))


def headline_row(**fields: Any) -> HeadlineRow:
    """A HeadlineRow from the fields a test names, the others as UNSTATED says."""
    unstated = {
        name: UNSTATED[name] for name in ("predict_low", "predict_high", "predict_level", "tau", "i2", "verdict")
    }
    return HeadlineRow(**({"variant": "01"} | unstated | fields))


@dataclass
class Ref:
    chip: str
    gpu_cores: int | None
    machine_label: str
    model_label: str
    quant: str
    variant: str
    batch_size: int
    baseline_tg_tps: float
    tg_tps: float
    source: str = "PR"
    source_url: str = ""
    baseline_variant: str = "upstream"


def m5(variant: str, batch_size: int, base: float, value: float, **extra: Any) -> CellRow:
    return Cell("Apple M5 Pro", 20, "IQ2_XXS", variant, batch_size, base, value, value / base, **extra)


@pytest.mark.parametrize(
    ("baseline", "value", "expected"),
    [(148.0, 209.9, "148.0→209.9 (+42%)"), (71.5, 90.3, "71.5→90.3 (+26%)"), (307.3, 244.6, "307.3→244.6 (−20%)")],
)
def test_it_writes_the_published_form(baseline: float, value: float, expected: str) -> None:
    assert leaderboard.pair_text(baseline, value, value / baseline) == expected


def test_it_writes_parity_and_missing_values_plainly() -> None:
    assert leaderboard.format_change(1.0) == "±0.0%"
    assert leaderboard.pair_text(None, None, None) == "–→– (–)"


def test_it_groups_variants_under_a_baseline_row_with_the_amortisation_factor() -> None:
    cells = [
        m5("upstream", 1, 127.5, 127.5),
        m5("upstream", 8, 137.7, 137.7),
        m5("01", 1, 127.5, 127.5, ci_low=0.99, ci_high=1.01, n_submissions=3, n_contributors=2),
        m5("01", 8, 137.7, 237.7, ci_low=1.70, ci_high=1.76, n_submissions=3, n_contributors=2),
    ]
    [group] = leaderboard.build_board(cells, [], "upstream", ["upstream", "01", "01+02"])
    assert (group.label, group.slug, group.batch_sizes) == ("Apple M5 Pro (20-core GPU)", "apple-m5-pro-20c", [1, 8])
    baseline, patched = group.rows
    assert [c.text for c in baseline.cells] == ["127.5", "137.7"]
    assert baseline.amortisation == "1.08×"
    assert patched.cells[1].text == "137.7→237.7 (+73%)"
    assert patched.cells[1].details == ("range +70…+76 · n=3", "· too few"), "a range is never 95%"
    assert patched.cells[1].full.splitlines() == [
        "range of 3 machines: +70% to +76%",
        "too few machines",
        "3 submissions, 2 contributors",
    ]
    assert patched.amortisation == "1.86×"


def test_it_shows_fully_excluded_cells_as_excluded_with_the_reason() -> None:
    cells = [
        m5("upstream", 4, 148, 148),
        Cell("Apple M5 Pro", 20, "IQ2_XXS", "01+02", 4, None, None, None, n_submissions=0, n_excluded_correctness=2),
        m5("01", 4, 148, 210, n_excluded_degenerate=1),
    ]
    [group] = leaderboard.build_board(cells, [], "upstream", ["upstream", "01", "01+02"])
    by_variant = {row.variant: row.cells[0] for row in group.rows}
    assert (by_variant["01+02"].state, by_variant["01+02"].details) == ("excluded", ("2 excluded: correctness failed",))
    assert by_variant["01"].details[-1] == "1 excluded: degenerate output"


def test_it_puts_published_rows_beside_crowd_rows_of_the_same_chip_and_quant_without_mixing() -> None:
    cells = [m5("upstream", 4, 100, 100), m5("01", 4, 100, 120)]
    refs = [
        Ref("Apple M5 Pro", None, "M5 Pro 24GB", "Qwen3-1.7B UD-IQ2_XXS", "IQ2_XXS", "01", 4, 148.0, 209.9),
        Ref("Apple M5 Pro", None, "M5 Pro 24GB", "Qwen3-1.7B UD-IQ2_XXS", "IQ2_XXS", "01", 16, 307.3, 244.6),
        Ref("Apple M1", None, "M1 16GB", "Qwen3-1.7B UD-IQ2_XXS", "IQ2_XXS", "01", 4, 71.5, 90.3),
    ]
    groups = leaderboard.build_board(cells, refs, "upstream", ["upstream", "01"])
    assert [(g.chip, bool(g.rows)) for g in groups] == [("Apple M1", False), ("Apple M5 Pro", True)]
    m5_group = groups[1]
    assert m5_group.batch_sizes == [4, 16]
    assert m5_group.rows[1].cells[0].text == "100.0→120.0 (+20%)"  # the crowd median stays the crowd's
    [ref] = m5_group.references
    assert [c.text for c in ref.cells] == ["148.0→209.9 (+42%)", "307.3→244.6 (−20%)"]


def test_it_orders_chips_by_generation_then_tier_within_a_quant() -> None:
    cells = [
        Cell(chip, 10, quant, "upstream", 1, 1.0, 1.0, 1.0)
        for chip in ("Apple M4 Pro", "Apple M1 Max", "Apple M4", "Apple M10")
        for quant in ("Q4_K_M", "IQ2_XXS")
    ]
    groups = leaderboard.build_board(cells, [], "upstream", ["upstream"])
    assert [(g.quant, g.chip) for g in groups][:4] == [
        ("IQ2_XXS", "Apple M1 Max"),
        ("IQ2_XXS", "Apple M4"),
        ("IQ2_XXS", "Apple M4 Pro"),
        ("IQ2_XXS", "Apple M10"),
    ]


def test_it_lists_every_m1_to_m5_tier_and_which_ones_have_rows() -> None:
    rows, others = leaderboard.coverage(["Apple M3 Max", "Apple M1", "Intel Xeon Gold 6338", "Apple M1"])
    table = {name: has for row in rows for name, has in row.tiers}
    assert len(table) == 20
    assert table["M3 Max"] and table["M1"]
    assert not table["M1 Pro"] and not table["M5 Ultra"]
    assert others == ["Intel Xeon Gold 6338"]


def test_it_charts_one_line_per_chip_plus_dotted_published_lines() -> None:
    cells = [
        m5("01", 4, 100, 142, ci_low=1.4, ci_high=1.44, n_submissions=2),
        Cell("Apple M1", 8, "IQ2_XXS", "01", 4, 70, 88, 88 / 70, n_submissions=1),
        Cell("Apple M1", 8, "IQ2_XXS", "01", 8, None, None, None, n_submissions=0, n_excluded_correctness=1),
    ]
    refs = [Ref("Apple M1", None, "M1 16GB", "Qwen3", "IQ2_XXS", "01", 4, 71.5, 90.3)]
    series = chart_series.speedup_series(cells, refs, "IQ2_XXS", "01")
    assert [(s.name, s.reference, len(s.points)) for s in series] == [
        ("Apple M1 (8-core GPU)", False, 1),
        ("Apple M5 Pro (20-core GPU)", False, 1),
        ("M1 16GB", True, 1),
    ]


def test_it_charts_throughput_per_variant_with_the_baseline_from_its_own_cells() -> None:
    cells = [m5("upstream", 1, 120, 120), m5("01", 1, 120, 121), m5("01", 8, 130, 230)]
    series = {
        s.name: [(p.batch_size, p.value) for p in s.sorted_points()]
        for s in chart_series.throughput_series(cells, "IQ2_XXS", "upstream")
    }
    assert series == {"upstream": [(1, 120), (8, 130)], "01": [(1, 121), (8, 230)]}


def test_it_charts_published_throughput_as_dotted_baseline_and_variant_lines() -> None:
    refs = [
        Ref("Apple M1", None, "M1 16GB", "Qwen3", "IQ2_XXS", "01", 8, 73.6, 94.2),
        Ref("Apple M1", None, "M1 16GB", "Qwen3", "IQ2_XXS", "01", 4, 71.5, 90.3),
        Ref("Apple M1", None, "M1 16GB", "Qwen3", "IQ3_XXS", "01", 4, 60.0, 70.0),
    ]
    series = chart_series.reference_throughput_series(refs, "IQ2_XXS")
    assert [(s.name, s.reference, [(p.batch_size, p.value) for p in s.sorted_points()]) for s in series] == [
        ("M1 16GB: 01", True, [(4, 90.3), (8, 94.2)]),
        ("M1 16GB: upstream", True, [(4, 71.5), (8, 73.6)]),
    ]
