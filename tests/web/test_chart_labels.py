"""Issue 25: names from payloads reach Plotly's labels, where plotly.js reads <a href>, <b>, <br>...
as markup and %{...} as a hover-template placeholder; they must show as typed, never as markup."""

from typing import Any

from benchhub.web import charts
from benchhub.web.charts import Point, Series

LINK = '<a href="https://evil.example/">Apple M5</a><br>'


def _labels(figure: dict[str, Any]) -> list[str]:
    texts = [figure["layout"]["title"]["text"]]
    for trace in figure["data"]:
        texts += [trace[key] for key in ("name", "hovertemplate") if key in trace]
    return texts


def test_it_escapes_markup_in_every_name_and_title_of_the_line_figures() -> None:
    series = [Series(LINK, (Point(1, 1.2, 1.1, 1.3, 3),)), Series(LINK, (Point(1, 1.1),), reference=True)]
    for figure in (charts.speedup_figure(series, f"{LINK}: 01"), charts.throughput_figure(series, LINK)):
        labels = _labels(figure)
        assert not [text for text in labels if "<a" in text or "<br>" in text]
        assert figure["data"][-1]["name"].startswith('&lt;a href="https://evil.example/"&gt;Apple M5&lt;/a&gt;')


def test_it_escapes_markup_and_placeholders_in_the_quant_mix() -> None:
    figure = charts.quant_mix_figure({"<b>Q4_K</b>%{x}": 3, "F32": 1}, title="<i>mix</i>")
    assert not [text for text in _labels(figure) if "<b>" in text or "<i>" in text]
    assert figure["data"][0]["name"] == "&lt;b&gt;Q4_K&lt;/b&gt;%{x} 75.0%"  # a name is no template
    assert figure["data"][0]["hovertemplate"].startswith("&lt;b&gt;Q4_K&lt;/b&gt;&#37;{x}: 3 bytes")


def test_it_leaves_plain_names_as_they_are() -> None:
    figure = charts.speedup_figure([Series("Apple M5 Pro (20-core GPU)", (Point(1, 1.0),))], "IQ2_XXS: 01")
    assert figure["data"][0]["name"] == "Apple M5 Pro (20-core GPU)"
    assert figure["layout"]["title"]["text"] == "IQ2_XXS: 01"
