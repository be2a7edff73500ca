"""Pure functions from measured rows to Plotly figures: no ORM, no request, so every chart can be
tested from plain values. The pages embed `figure_dict(...)` and static/js/charts.js draws it with
the vendored plotly.js."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import plotly.graph_objects as go

# Colour-blind-safe palette (Okabe-Ito), ordered so neighbouring lines stay distinguishable.
PALETTE = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000", "#F0E442")
REFERENCE_DASH = "dot"


@dataclass(frozen=True)
class Point:
    """One value at one batch size, with its 95% interval where one exists."""

    batch_size: int
    value: float
    low: float | None = None
    high: float | None = None
    n_submissions: int | None = None


@dataclass(frozen=True)
class Series:
    name: str
    points: tuple[Point, ...]
    # Published reference rows are drawn dotted and labelled, never blended with crowd lines.
    reference: bool = False
    meta: Mapping[str, str] = field(default_factory=dict)

    def sorted_points(self) -> list[Point]:
        return sorted(self.points, key=lambda p: p.batch_size)


def _rgba(hex_colour: str, alpha: float) -> str:
    red, green, blue = (int(hex_colour[i : i + 2], 16) for i in (1, 3, 5))
    return f"rgba({red},{green},{blue},{alpha})"


def _base_layout(title: str, y_title: str, batch_sizes: Sequence[int]) -> dict[str, object]:
    return {
        "title": {"text": title, "x": 0, "xanchor": "left", "font": {"size": 16}},
        "xaxis": {"title": {"text": "batch size (sequences decoded at once)"}, "tickvals": list(batch_sizes)},
        "yaxis": {"title": {"text": y_title}, "rangemode": "tozero"},
        "legend": {"orientation": "h", "y": -0.25, "x": 0},
        "margin": {"l": 56, "r": 16, "t": 48, "b": 96},
        "hovermode": "x unified",
        "template": "plotly_white",
        "font": {"family": "system-ui, -apple-system, Segoe UI, sans-serif", "size": 13, "color": "#1a1a1a"},
    }


def _interval_band(series: Series, colour: str) -> list[go.Scatter]:
    """Two traces: the upper edge (invisible) and the lower edge filled up to it."""
    points = [p for p in series.sorted_points() if p.low is not None and p.high is not None]
    if not points:
        return []
    xs = [p.batch_size for p in points]
    common = {"mode": "lines", "line": {"width": 0}, "hoverinfo": "skip", "showlegend": False}
    return [
        go.Scatter(x=xs, y=[p.high for p in points], legendgroup=series.name, **common),
        go.Scatter(
            x=xs,
            y=[p.low for p in points],
            fill="tonexty",
            fillcolor=_rgba(colour, 0.15),
            legendgroup=series.name,
            **common,
        ),
    ]


def _line(series: Series, colour: str, hover_template: str) -> go.Scatter:
    points = series.sorted_points()
    name = f"{series.name} (published, not signed)" if series.reference else series.name
    return go.Scatter(
        x=[p.batch_size for p in points],
        y=[p.value for p in points],
        customdata=[[p.n_submissions if p.n_submissions is not None else "–"] for p in points],
        mode="lines+markers",
        name=name,
        legendgroup=series.name,
        line={"color": colour, "width": 2, "dash": REFERENCE_DASH if series.reference else "solid"},
        marker={"size": 7, "symbol": "diamond-open" if series.reference else "circle"},
        hovertemplate=hover_template,
    )


def _all_batch_sizes(series: Iterable[Series]) -> list[int]:
    return sorted({p.batch_size for s in series for p in s.points})


def _lines_figure(series: Sequence[Series], title: str, y_title: str, hover_template: str) -> go.Figure:
    figure = go.Figure()
    for index, one in enumerate(series):
        colour = PALETTE[index % len(PALETTE)]
        if not one.reference:
            figure.add_traces(_interval_band(one, colour))
        figure.add_trace(_line(one, colour, hover_template))
    figure.update_layout(**_base_layout(title, y_title, _all_batch_sizes(series)))
    return figure


def speedup_figure(series: Sequence[Series], title: str) -> go.Figure:
    """Speedup over the baseline against batch size; 1.0 (parity) drawn as a reference line."""
    figure = _lines_figure(
        series,
        title,
        "speedup over baseline (×)",
        "%{y:.2f}× (n=%{customdata[0]})<extra>%{fullData.name}</extra>",
    )
    figure.add_hline(y=1.0, line={"color": "#555555", "width": 1, "dash": "dash"})
    return figure


def throughput_figure(series: Sequence[Series], title: str) -> go.Figure:
    """Decode tokens per second against batch size."""
    return _lines_figure(
        series,
        title,
        "decode throughput (tokens/s)",
        "%{y:.1f} t/s (n=%{customdata[0]})<extra>%{fullData.name}</extra>",
    )


def quant_mix_figure(tensor_bytes_by_type: Mapping[str, int], title: str = "Bytes per tensor type") -> go.Figure:
    """One horizontal stacked bar: which ggml types hold the model's bytes."""
    total = sum(tensor_bytes_by_type.values()) or 1
    figure = go.Figure()
    ordered = sorted(tensor_bytes_by_type.items(), key=lambda item: (-item[1], item[0]))
    for index, (type_name, size) in enumerate(ordered):
        share = 100.0 * size / total
        figure.add_trace(
            go.Bar(
                x=[share],
                y=["model"],
                orientation="h",
                name=f"{type_name} {share:.1f}%",
                marker={"color": PALETTE[index % len(PALETTE)]},
                hovertemplate=f"{type_name}: {size:,} bytes ({share:.1f}%)<extra></extra>",
            )
        )
    figure.update_layout(
        barmode="stack",
        title={"text": title, "x": 0, "xanchor": "left", "font": {"size": 16}},
        xaxis={"title": {"text": "share of tensor bytes (%)"}, "range": [0, 100]},
        yaxis={"visible": False},
        height=220,
        margin={"l": 16, "r": 16, "t": 48, "b": 48},
        legend={"orientation": "h", "y": -0.6, "x": 0},
        template="plotly_white",
        font={"family": "system-ui, -apple-system, Segoe UI, sans-serif", "size": 13, "color": "#1a1a1a"},
    )
    return figure


def figure_dict(figure: go.Figure) -> dict[str, object]:
    """The figure as plain data for the page's json_script data island; the round trip through
    plotly's own encoder turns its typed arrays and numpy values into plain JSON."""
    loaded: dict[str, object] = json.loads(figure.to_json())
    return loaded
