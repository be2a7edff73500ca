"""charts.py is pure: figures are checked from plain values, no database."""

import re
from pathlib import Path

import plotly
import plotly.graph_objects as go

from benchhub.web import charts
from benchhub.web.charts import Point, Series

ROOT = Path(__file__).resolve().parents[2]

M5_PRO = Series(
    name="Apple M5 Pro (20-core GPU)",
    points=(
        Point(8, 1.73, 1.70, 1.76, 3),
        Point(4, 1.42, 1.38, 1.46, 3),
        Point(1, 1.0, 0.99, 1.01, 3),
    ),
)
M1_REFERENCE = Series(name="Apple M1 (published)", points=(Point(4, 1.26), Point(8, 1.28)), reference=True)


def test_it_draws_one_line_per_series_sorted_by_batch_size_with_an_interval_band() -> None:
    figure = charts.speedup_figure([M5_PRO], "IQ2_XXS: 01 over upstream")
    data = figure["data"]
    assert isinstance(data, list)
    lines = [trace for trace in data if trace.get("mode") == "lines+markers"]
    bands = [trace for trace in data if trace.get("hoverinfo") == "skip"]
    assert len(lines) == 1
    assert lines[0]["x"] == [1, 4, 8]
    assert lines[0]["y"] == [1.0, 1.42, 1.73]
    assert [band["y"] for band in bands] == [[1.01, 1.46, 1.76], [0.99, 1.38, 1.70]]
    assert bands[1]["fill"] == "tonexty"


def test_it_marks_reference_series_dotted_and_labelled_and_gives_them_no_band() -> None:
    figure = charts.speedup_figure([M5_PRO, M1_REFERENCE], "t")
    data = figure["data"]
    assert isinstance(data, list)
    reference = [trace for trace in data if "published" in str(trace.get("name", ""))]
    assert len(reference) == 1
    assert reference[0]["name"] == "Apple M1 (published) (published, not signed)"
    assert reference[0]["line"]["dash"] == "dot"
    assert len([trace for trace in data if trace.get("hoverinfo") == "skip"]) == 2


def test_it_draws_the_parity_line_on_speedup_charts_only() -> None:
    speedup = charts.speedup_figure([M5_PRO], "t")
    throughput = charts.throughput_figure([M5_PRO], "t")
    assert speedup["layout"]["shapes"][0]["y0"] == 1.0
    assert "shapes" not in throughput["layout"]


def test_it_labels_ticks_with_every_measured_batch_size() -> None:
    figure = charts.throughput_figure([M5_PRO, M1_REFERENCE], "t")
    assert figure["layout"]["xaxis"]["tickvals"] == [1, 4, 8]


def test_it_skips_the_band_where_no_interval_exists() -> None:
    lone = Series(name="single submission", points=(Point(1, 100.0), Point(8, 180.0)))
    data = charts.throughput_figure([lone], "t")["data"]
    assert isinstance(data, list)
    assert [trace["mode"] for trace in data] == ["lines+markers"]


def test_it_stacks_the_quant_mix_by_share_of_bytes_largest_first() -> None:
    figure = charts.quant_mix_figure({"F32": 1_000, "IQ2_XXS": 6_000, "Q4_K": 3_000})
    data = figure["data"]
    assert isinstance(data, list)
    assert [trace["name"] for trace in data] == ["IQ2_XXS 60.0%", "Q4_K 30.0%", "F32 10.0%"]
    assert [trace["x"] for trace in data] == [[60.0], [30.0], [10.0]]


def test_it_draws_an_empty_quant_mix_without_dividing_by_zero() -> None:
    assert charts.quant_mix_figure({})["data"] == []


def test_it_vendors_the_cartesian_dist_of_the_plotly_js_the_python_package_was_built_against() -> None:
    """The figures are validated by plotly.py (below) and drawn by the cartesian bundle: the same
    plotly.js version, a third of the bytes (scatter and bar are all the pages draw)."""
    shipped = (Path(plotly.__file__).parent / "package_data" / "plotly.min.js").read_text()[:200]
    vendored = ROOT / "static" / "vendor" / "plotly-cartesian-4.1.1.min.js"
    version = re.search(r"plotly\.js v(\d+\.\d+\.\d+)", shipped)
    assert version and version.group(1) == "4.1.1"
    assert vendored.read_text()[:200].startswith("/**\n* plotly.js (cartesian - minified) v4.1.1\n")
    assert vendored.stat().st_size < 2_000_000
    assert "MIT" in (ROOT / "static" / "vendor" / "plotly-cartesian-4.1.1.LICENSE").read_text()


def test_it_builds_figures_that_plotly_accepts_as_valid() -> None:
    figures = [
        charts.speedup_figure([M5_PRO, M1_REFERENCE], "t"),
        charts.throughput_figure([M5_PRO], "t"),
        charts.quant_mix_figure({"IQ2_XXS": 5, "F32": 1}),
    ]
    for figure in figures:
        # graph_objects validates every property name and value, and raises on anything plotly.js would not know.
        assert go.Figure(figure).to_plotly_json()["data"]
