"""Every page follows cells v3 (docs/protocol.md section 7; issue 35 points 6-9, issue 30's pending
machines): one count of machines, controls apart, models told apart by sha256, a ref's commit shown,
the verdict words with their threshold, the interval and the prediction labelled."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from benchhub_protocol import envelope
from django.test import Client
from django.urls import reverse

from benchhub.results.models import Headline
from tests import versioning
from tests.conftest import Api
from tests.server.test_few_row_mma import few_row_payload

from . import v3_site
from .helpers import page_text
from .v3_site import IQ2_SHA, LABEL, judge

pytestmark = pytest.mark.django_db

THRESHOLD = "Verdicts: “faster” or “slower” is a change of at least 2%"


@pytest.fixture
def site(api: Api, ada: envelope.Signer, personas: dict[str, envelope.Signer]) -> v3_site.Site:
    return v3_site.build(api, personas)


def ranking_of(text: str, table: str = "ranking") -> str:
    start = text.index(f'id="{table}"')
    return text[start : text.index("</table>", start)]


def line_of(ranking: str, marker: str) -> str:
    return next(row for row in ranking.split("<tr")[1:] if marker in row)


def board_of(text: str) -> str:
    """The page without its Markdown export (which states the threshold too)."""
    return re.sub(r"<textarea.*?</textarea>", "", text, flags=re.S)


def islands(text: str) -> dict[str, Any]:
    found = re.findall(r'<script id="([^"]+)" type="application/json">(.*?)</script>', text, re.S)
    return {name: json.loads(body) for name, body in found}


def traces(figure: dict[str, Any]) -> list[str]:
    return [trace["name"] for trace in figure["data"] if trace.get("mode") == "lines+markers"]


def test_a_machine_is_counted_the_same_on_the_picker_the_ranking_and_the_api(
    client: Client, site: v3_site.Site
) -> None:
    """Two keys, each measuring one batch size, none all of BS 2–8: every cell counts 1 machine,
    and the ranking line and the picker show the most machines one of their cells counts (1), not
    the machines behind a headline (0)."""
    api = client.get("/api/v1/leaderboard/", {"campaign": "mv-ext-iquants", "model": IQ2_SHA, "variant": "01"})
    metal = [row for row in api.json()["rows"] if row["backend"] == "metal"]
    assert sorted((row["batch_size"], row["n_machines"]) for row in metal) == [(2, 1), (4, 1)]
    text = page_text(client.get("/"))
    picker = re.search(rf'<option value="{IQ2_SHA}"[^>]*>([^<]*)</option>', text)
    assert picker and picker.group(1).endswith("(IQ2_XXS, 1 machine)"), picker
    assert 'data-value="1">1 machine<' in line_of(ranking_of(text), "sha256 bbbbbbbb")


def test_controls_are_shown_apart_and_kept_out_of_the_ranking_and_the_chart(client: Client, site: v3_site.Site) -> None:
    text = page_text(client.get("/"))
    assert "NVIDIA H200" not in ranking_of(text)
    controls = ranking_of(text, "controls")
    assert "NVIDIA H200" in controls and "control: the patches do not touch CUDA" in controls
    assert all("H200" not in name for name in traces(islands(text)["speedup-0"]))
    chip = page_text(client.get(reverse("chip", args=["nvidia-h200"])))
    assert '<span class="badge control">control: the patches do not touch CUDA</span>' in chip


def test_model_files_that_share_a_name_are_told_apart_everywhere(client: Client, site: v3_site.Site) -> None:
    text = page_text(client.get("/"))
    for sha in ("bbbbbbbb", "cccccccc"):
        assert f"{LABEL} · sha256 {sha} (IQ2_XXS" in text  # the picker
        assert f"{LABEL} · sha256 {sha}" in ranking_of(text)
    chip = page_text(client.get(reverse("chip", args=["apple-m5-pro-20c"])))
    figures = {name: figure for name, figure in islands(chip).items() if name.startswith("tps-mv-ext-iquants")}
    titles = sorted(figure["layout"]["title"]["text"] for figure in figures.values())
    assert [title.split(" (IQ2_XXS)")[0] for title in titles] == [
        f"{LABEL} · sha256 bbbbbbbb",
        f"{LABEL} · sha256 cccccccc",
    ]
    # Each chart draws its own file only: the twin's +20% is not in the other file's lines.
    by_title = {figure["layout"]["title"]["text"]: figure for figure in figures.values()}
    bbbb = next(figure for title, figure in by_title.items() if "bbbbbbbb" in title)
    variant = next(trace for trace in bbbb["data"] if trace.get("name") == "01")
    assert 120.0 not in variant["y"]


def test_a_pinned_pr_variant_shows_its_commit_and_an_older_pin_stays_apart(
    client: Client, api: Api, ada: envelope.Signer, site: v3_site.Site
) -> None:
    first, second = "a" * 40, "1234567" + "f" * 33
    for commit, tg in ((first, 49.7), (second, 51.0)):
        payload = few_row_payload(commit, pr_tg=tg)
        payload["campaign_digest"] = versioning.publish("few-row-mma", versioning.pin(commit)).digest
        v3_site.submitted(api, ada, payload)
    chip = page_text(client.get(reverse("chip", args=["apple-m5-pro-20c"])))
    assert f'at <code title="{second}">{second[:7]}</code>' in chip and first not in chip  # superseded: apart
    home = page_text(client.get("/", {"campaign": "few-row-mma"}))
    assert f'<code title="{second}">1234567</code>' in ranking_of(home)
    rows = client.get("/api/v1/leaderboard/", {"campaign": "few-row-mma", "variant": "pr-29869"}).json()["rows"]
    assert {(row["commit"], row["superseded"]) for row in rows} == {(first, True), (second, False)}
    versions = page_text(client.get(reverse("campaign", args=["few-row-mma"])))
    assert "Superseded cells of version 2" in versions and first[:12] in versions


def test_the_verdict_words_threshold_interval_prediction_and_pending_machines(
    client: Client, site: v3_site.Site
) -> None:
    judge(
        {"model_sha256": IQ2_SHA, "backend": "metal", "variant": "01"},
        verdict="within",
        interval="95%, page-wise",
        ci_low=0.99,
        ci_high=1.03,
        predict_low=0.97,
        predict_high=1.03,
        predict_level=0.8,
        n_pending=2,
    )
    chip = page_text(client.get(reverse("chip", args=["apple-m5-pro-20c"])))
    assert board_of(chip).count(THRESHOLD) == 1  # once near the campaign's tables
    assert '<span class="detail">≈ within ±2%</span>' in chip
    assert chip.count('<p class="legend">') == chip.count('<table class="board">') - chip.count("published only")
    assert "95%, page-wise interval for the typical machine: −1% to +3%, 1 machine" in chip
    assert "what your Mac will likely see: 80% of machines −3% to +3%" in chip
    assert '<span class="detail">2 machines pending</span>' in chip
    assert "no clear change" not in chip and "95% CI" not in chip
    home = page_text(client.get("/", {"model": IQ2_SHA}))
    assert board_of(home).count(THRESHOLD) == 1
    assert "2 machines pending" in ranking_of(home)
    markdown = home[home.index('id="markdown-campaign"') :]
    assert "within ±2%" in markdown and "95%, page-wise interval" in markdown and THRESHOLD in markdown


def test_under_identical_code_no_ranking_line_presents_a_speed_up_as_established(
    client: Client, site: v3_site.Site
) -> None:
    """Lines with an estimated gain but no "faster" verdict print it plainly, beside their verdict;
    only a "faster" one is in bold."""
    judge({"backend": "metal", "variant": "01"}, verdict="unclear")
    Headline.objects.filter(backend="metal", variant="01").update(
        speedup=1.12, interval="95%, page-wise", ci_low=0.95, ci_high=1.3, verdict="unclear", n_machines=2
    )
    ranking = ranking_of(page_text(client.get("/")))
    crowd = [row for row in ranking.split("<tr")[1:] if "+12%" in row]
    assert len(crowd) == 2 and all("<strong>" not in row and ">unclear<" in row for row in crowd)
    Headline.objects.filter(model_sha256=IQ2_SHA, variant="01").update(verdict="faster", ci_low=1.05)
    judge({"model_sha256": IQ2_SHA}, verdict="faster")  # a new version of the cells: the board renders again
    ranking = ranking_of(page_text(client.get("/")))
    assert "<strong>+12%</strong>" in line_of(ranking, "sha256 bbbbbbbb")
