"""Pure functions from measured rows to Plotly figures: no ORM, no request, so every chart can be
tested from plain values. Figures are built as plain Plotly JSON (dicts): plotly's graph objects
validate every property on construction, which costs ~100 ms per chart, too slow for a page; the
tests validate the same dicts with `plotly.graph_objects.Figure` instead. The pages embed them as
JSON data islands and static/js/charts.js draws them with the vendored plotly.js."""

from __future__ import annotations

import html
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

Figure = dict[str, Any]

# Colour-blind-safe palettes (Okabe-Ito, then Tol muted without its pale tones), so up to 13 lines
# differ by colour; neighbouring lines stay distinguishable.
PALETTE = (
    "#0072B2",
    "#D55E00",
    "#009E73",
    "#CC79A7",
    "#E69F00",
    "#56B4E9",
    "#000000",
    "#882255",
    "#117733",
    "#999933",
    "#AA4499",
    "#44AA99",
    "#661100",
)
REFERENCE_DASH = "dot"
FONT = {"family": "system-ui, -apple-system, Segoe UI, sans-serif", "size": 13, "color": "#1a1a1a"}
GRID = "#e3e6ea"
LEGEND_ROW_PX = 24
MIN_HEIGHT_PX = 380


@dataclass(frozen=True)
class Point:
    """One value at one batch size, with its 95% interval where one exists."""

    batch_size: int
    value: float
    low: float | None = None
    high: float | None = None
    n_machines: int | None = None


@dataclass(frozen=True)
class Series:
    name: str
    points: tuple[Point, ...]
    # Published reference rows are drawn dotted and labelled, never blended with crowd lines.
    reference: bool = False
    meta: Mapping[str, str] = field(default_factory=dict)
    dash: str = "solid"  # how a line of a second source is told apart (compare: B dashed)
    colour_key: str = ""  # series with the same key share a colour (compare: one variant, A and B)

    def sorted_points(self) -> list[Point]:
        return sorted(self.points, key=lambda p: p.batch_size)


def plotly_text(text: str, in_template: bool = False) -> str:
    """Text for a Plotly name, title or hover label. plotly.js reads <a href>, <b>, <br>... there as
    markup (a chip named `<a href=...>` became a live link in a legend), and %{...} in a hover
    template as a placeholder; as entities they show as the characters they stand for."""
    escaped = html.escape(text, quote=False)
    return escaped.replace("%", "&#37;") if in_template else escaped


def _rgba(hex_colour: str, alpha: float) -> str:
    red, green, blue = (int(hex_colour[i : i + 2], 16) for i in (1, 3, 5))
    return f"rgba({red},{green},{blue},{alpha})"


def _axis(title: str, **extra: Any) -> dict[str, Any]:
    axis = {"gridcolor": GRID, "zerolinecolor": GRID, "automargin": True, **extra}
    return {"title": {"text": title}, **axis} if title else axis


def _base_layout(title: str, y_title: str, batch_sizes: Sequence[int], n_legend_entries: int) -> dict[str, Any]:
    # The legend is a list right of the plot, one entry a line, and the figure is tall enough for
    # all of them: a legend under the plot gets at most half its height and hid entries behind a
    # scrollbar. charts.js moves it under the plot on a phone, growing the figure by its lines.
    return {
        "title": {"text": plotly_text(title), "x": 0, "xanchor": "left", "font": {"size": 16}},
        # Ticks read BS1, BS2, ... as the tables' column headers do.
        "xaxis": _axis("", tickvals=list(batch_sizes), ticktext=[f"BS{size}" for size in batch_sizes]),
        "yaxis": _axis(y_title, rangemode="tozero"),
        "legend": {
            "orientation": "v",
            "x": 1.02,
            "xanchor": "left",
            "y": 1,
            "yanchor": "top",
            "font": {"size": 12},
            "maxheight": 1,  # the whole plot's height
            "tracegroupgap": 0,  # each line is its own legend group (with its band): no gap between entries
        },
        "margin": {"l": 56, "r": 16, "t": 48, "b": 48},
        "height": max(MIN_HEIGHT_PX, 120 + LEGEND_ROW_PX * n_legend_entries),
        "showlegend": True,  # plotly hides a lone trace's legend; a lone published line must still say so
        "hovermode": "x unified",
        "paper_bgcolor": "#ffffff",
        "plot_bgcolor": "#ffffff",
        "font": FONT,
    }


def _interval_band(series: Series, colour: str) -> list[dict[str, Any]]:
    """Two traces: the upper edge (invisible) and the lower edge filled up to it."""
    points = [p for p in series.sorted_points() if p.low is not None and p.high is not None]
    if not points:
        return []
    xs = [p.batch_size for p in points]
    common = {"type": "scatter", "mode": "lines", "line": {"width": 0}, "hoverinfo": "skip", "showlegend": False}
    return [
        {**common, "x": xs, "y": [p.high for p in points], "legendgroup": series.name},
        {
            **common,
            "x": xs,
            "y": [p.low for p in points],
            "fill": "tonexty",
            "fillcolor": _rgba(colour, 0.15),
            "legendgroup": series.name,
        },
    ]


def _line(series: Series, colour: str, hover_template: str) -> dict[str, Any]:
    points = series.sorted_points()
    return {
        "type": "scatter",
        "x": [p.batch_size for p in points],
        "y": [p.value for p in points],
        "customdata": [[p.n_machines if p.n_machines is not None else "–"] for p in points],
        "mode": "lines+markers",
        "name": plotly_text(f"{series.name} (published, not signed)" if series.reference else series.name),
        "legendgroup": series.name,
        "line": {"color": colour, "width": 2, "dash": REFERENCE_DASH if series.reference else series.dash},
        "marker": {"size": 7, "symbol": "diamond-open" if series.reference else "circle"},
        "hovertemplate": hover_template,
    }


def _all_batch_sizes(series: Iterable[Series]) -> list[int]:
    return sorted({p.batch_size for s in series for p in s.points})


def _lines_figure(series: Sequence[Series], title: str, y_title: str, hover_template: str) -> Figure:
    data: list[dict[str, Any]] = []
    keys: dict[str, int] = {}
    for one in series:
        index = keys.setdefault(one.colour_key or one.name, len(keys))
        colour = PALETTE[index % len(PALETTE)]
        if not one.reference:
            data += _interval_band(one, colour)
        data.append(_line(one, colour, hover_template))
    layout = _base_layout(title, y_title, _all_batch_sizes(series), len(series))
    if not any(one.points for one in series):
        _say_empty(layout)
    return {"data": data, "layout": layout}


EMPTY_MESSAGE = "No machine counts here yet: the table says why."  # fits a phone's width


def _say_empty(layout: dict[str, Any]) -> None:
    """An empty chart says so inside its frame, instead of drawing bare axes."""
    layout["annotations"] = [
        {
            "text": plotly_text(EMPTY_MESSAGE).replace(": ", ":<br>"),  # two short lines fit a phone
            "xref": "paper",
            "yref": "paper",
            "x": 0.5,
            "y": 0.5,
            "showarrow": False,
            "font": {"size": 13, "color": "#4a4a4a"},
        }
    ]
    layout["xaxis"]["visible"] = False
    layout["yaxis"]["visible"] = False
    layout["height"] = 220
    layout["showlegend"] = False


def speedup_figure(series: Sequence[Series], title: str) -> Figure:
    """Speedup over the baseline against batch size; 1.0 (parity) drawn as a reference line."""
    figure = _lines_figure(
        series,
        title,
        "speedup over baseline (×)",
        "%{y:.2f}× (%{customdata[0]} machines)<extra>%{fullData.name}</extra>",
    )
    figure["layout"]["shapes"] = [
        {
            "type": "line",
            "xref": "paper",
            "x0": 0,
            "x1": 1,
            "yref": "y",
            "y0": 1.0,
            "y1": 1.0,
            "line": {"color": "#555555", "width": 1, "dash": "dash"},
        }
    ]
    return figure


def throughput_figure(series: Sequence[Series], title: str) -> Figure:
    """Decode tokens per second against batch size."""
    return _lines_figure(
        series,
        title,
        "decode throughput (tokens/s)",
        "%{y:.1f} t/s (%{customdata[0]} machines)<extra>%{fullData.name}</extra>",
    )


def quant_mix_figure(tensor_bytes_by_type: Mapping[str, int], title: str = "Bytes per tensor type") -> Figure:
    """One horizontal stacked bar: which ggml types hold the model's bytes."""
    total = sum(tensor_bytes_by_type.values()) or 1
    ordered = sorted(tensor_bytes_by_type.items(), key=lambda item: (-item[1], item[0]))
    data = []
    for index, (type_name, size) in enumerate(ordered):
        share = round(100.0 * size / total, 1)
        data.append(
            {
                "type": "bar",
                "x": [share],
                "y": ["model"],
                "orientation": "h",
                "name": f"{plotly_text(type_name)} {share:.1f}%",
                "marker": {"color": PALETTE[index % len(PALETTE)]},
                "hovertemplate": (
                    f"{plotly_text(type_name, in_template=True)}: {size:,} bytes ({share:.1f}%)<extra></extra>"
                ),
            }
        )
    layout = {
        "barmode": "stack",
        "title": {"text": plotly_text(title), "x": 0, "xanchor": "left", "font": {"size": 16}},
        "xaxis": _axis("", range=[0, 100], ticksuffix="%"),
        "yaxis": {"visible": False},
        "height": 220,
        "margin": {"l": 16, "r": 16, "t": 48, "b": 48},
        "legend": {
            "orientation": "h",
            "yanchor": "top",
            "y": -0.35,
            "x": 0,
            "font": {"size": 12},
            "traceorder": "normal",
        },
        "paper_bgcolor": "#ffffff",
        "plot_bgcolor": "#ffffff",
        "font": FONT,
    }
    return {"data": data, "layout": layout}
