"""Every page, over data that came in through the real signed ingest path."""

from __future__ import annotations

import json
import math
import re
from io import StringIO
from typing import Any

import benchhub_agent
import pytest
from django.core.management import call_command
from django.test import Client
from django.urls import reverse

from benchhub.results.board import headline_rows
from benchhub.results.models import Campaign, Headline, LeaderboardCell, Submission
from benchhub.web import pages, words

from .helpers import page_text

pytestmark = pytest.mark.django_db


def test_it_explains_what_to_do_on_an_empty_database(client: Client) -> None:
    Campaign.objects.all().delete()
    text = page_text(client.get("/"))
    assert "No campaigns yet" in text
    assert "seed_demo" in text


def test_it_invites_the_first_contribution_when_a_campaign_has_no_rows(client: Client, live_campaign: Campaign) -> None:
    text = page_text(client.get("/"))
    assert "No crowd results yet for this campaign" in text
    assert 'href="/about/#contribute"' in text
    assert text.count('class="empty"') >= 19  # every tier of the coverage table is still needed


def test_it_shows_published_rows_marked_and_apart_before_any_crowd_row(client: Client, live_campaign: Campaign) -> None:
    call_command("load_reference_rows", stdout=StringIO())
    text = page_text(client.get("/"))
    assert text.count('<tr class="reference"') == 3  # the ranking's published lines: M5 Pro IQ2_XXS, IQ3_XXS; M1
    assert "M5 Pro 24GB" in text and "published, not signed" in text
    chip = page_text(client.get(reverse("chip", args=["apple-m5-pro"])))
    assert "148.0→209.9 (+42%)" in chip
    assert "published only" in chip


def test_it_renders_the_leaderboard_from_cells_with_counts_intervals_and_exclusions(
    client: Client, small_site: list[Submission], django_assert_max_num_queries: Any
) -> None:
    with django_assert_max_num_queries(9):  # 8, and the board's provenance (demo lines, backends) once per render
        text = page_text(client.get("/"))
    ranking = text[text.index('id="ranking"') : text.index("</table>", text.index('id="ranking"'))]
    assert 'href="/chips/apple-m5-pro-20c/">Apple M5 Pro (20-core GPU)</a>' in ranking
    m5_bs8 = LeaderboardCell.objects.get(chip="Apple M5 Pro", quant="IQ2_XXS", variant="01", batch_size=8)
    assert (m5_bs8.n_machines, m5_bs8.interval, m5_bs8.verdict) == (2, None, "too few machines")
    assert ">2 machines<" in ranking
    assert "95%" not in ranking, "no cell of the small site has an interval that claims a confidence"
    assert ">BS1<" not in ranking, "the ranking has one figure per line; every batch size is on the chip page"
    assert ranking.count('<svg class="spark"') >= 4  # a sparkline a measured line
    # Bold only for a published figure or an established change: none of these ranges is one.
    assert ranking.count("<strong>") == ranking.count('<tr class="reference"')
    assert '<script id="speedup-0" type="application/json">' in text
    assert "vendor/plotly-cartesian-4.1.1.min.js" in text
    chip = page_text(client.get(reverse("chip", args=["apple-m1-8c"])))
    assert "1 excluded: correctness failed" in chip  # M1 IQ2_XXS 01+02
    assert "1 excluded: degenerate output" in chip  # M1 IQ3_XXS 01
    assert "BS8/BS1" in chip and "too few machines\n1 submission, 1 contributor" in chip  # a cell's tooltip


M5, IQ2_LABEL = "Apple M5 Pro (20-core GPU)", "Qwen3-1.7B UD-IQ2_XXS (IQ2_XXS)"


def iq2_models() -> list[str]:
    return list(LeaderboardCell.objects.filter(quant="IQ2_XXS").values_list("model_sha256", flat=True).distinct())


def test_it_ranks_one_line_per_chip_and_model_by_evidence(client: Client, small_site: list[Submission]) -> None:
    text = page_text(client.get("/"))
    ranking = text[text.index('id="ranking"') : text.index("</table>", text.index('id="ranking"'))]
    crowd = re.findall(r'<tr data-quant[^>]*>.*?class="num headline" data-value="([0-9.]+)"', ranking, re.S)
    headlines = Headline.objects.filter(variant="01").exclude(speedup=None)
    keys = {row.speedup: words.evidence_key(row) for row in headline_rows(headlines)}
    shown = [keys[float(x)] for x in crowd if float(x)]  # lines with no headline (data-value 0) come last
    assert len(shown) >= 2 and shown == sorted(shown)
    expected = Headline.objects.get(chip="Apple M5 Pro", variant="01", model_sha256__in=iq2_models()).speedup
    line = ranking[ranking.index(f'href="/chips/apple-m5-pro-20c/">{M5}</a><span class="model">{IQ2_LABEL}') :]
    shown = re.search(r'headline" data-value="([0-9.]+)"', line)
    assert shown and math.isclose(float(shown.group(1)), expected, rel_tol=1e-9)


def test_it_charts_the_chosen_variant_and_lists_missing_chips(client: Client, small_site: list[Submission]) -> None:
    text = page_text(client.get("/", {"variant": "01+02"}))
    assert "(IQ2_XXS): 01+02 over upstream, by chip" in text
    assert "M5 Pro" in text
    coverage = text[text.index('id="coverage"') :]
    assert '✓ measured<span class="sr"> (M5 Pro)' in coverage
    assert 'needed<span class="sr"> (M2 Max)' in coverage


def test_it_offers_a_campaign_known_only_from_published_rows(client: Client, live_campaign: Campaign) -> None:
    Campaign.objects.filter(slug="few-row-mma").delete()  # as on a service that does not run it (yet)
    call_command("load_reference_rows", stdout=StringIO())
    text = page_text(client.get("/", {"campaign": "few-row-mma"}))
    assert "few-row-mma (published rows only)" in text
    assert "Apple M3 Ultra (60-core GPU) <span" in text and "published, not signed" in text
    chip = page_text(client.get(reverse("chip", args=["apple-m3-ultra-60c"])))
    assert "32.7→49.7 (+52%)" in chip and "38.6→119.7 (+210%)" in chip
    assert 'id="coverage"' not in text  # nobody can contribute to a campaign the service does not run


def test_it_shows_the_published_m3_ultra_rows_beside_the_live_few_row_mma_campaign(
    client: Client, live_campaign: Campaign
) -> None:
    call_command("load_reference_rows", stdout=StringIO())
    text = page_text(client.get("/", {"campaign": "few-row-mma"}))
    assert "published rows only" not in text
    assert "pr-29869" in text and "master-836d571" in text
    assert "Apple M3 Ultra (60-core GPU) <span" in text and '<tr class="reference"' in text
    assert 'id="coverage"' in text  # a live campaign asks for contributions


def test_it_answers_400_naming_an_unknown_campaign_variant_model_or_quant(
    client: Client, live_campaign: Campaign
) -> None:
    """Issues 30 and 33: an unknown filter value is a short 400 page, not a default board."""
    for field, value in (("campaign", "nope"), ("variant", "07"), ("model", "f" * 64), ("quant", "q9_z")):
        response = client.get("/", {field: value})
        assert response.status_code == 400, (field, response.status_code)
        assert f"Unknown {field}" in response.content.decode()


def test_it_shows_a_chip_with_its_charts_tables_and_submissions(
    client: Client, small_site: list[Submission], django_assert_max_num_queries: Any
) -> None:
    with django_assert_max_num_queries(
        13
    ):  # the Markdown export reads each live campaign's cells of the chip; +1 the board's provenance (demo lines)
        text = page_text(client.get(reverse("chip", args=["apple-m1-8c"])))
    assert "<h1>Apple M1 (8-core GPU)</h1>" in text
    assert "(IQ2_XXS): decode t/s by batch size" in text
    assert "IQ3_XXS" in text
    assert "71.5→90.3 (+26%)" in text  # the published M1 row shows on the chip page too
    assert "Copy as Markdown" in text and "| Apple" not in text
    assert "M1 16GB (MacBook Air): upstream (published, not signed)" in text  # and on its chart, dotted
    for submission in small_site:
        if submission.machine.chip == "Apple M1":
            assert reverse("submission", args=[submission.pk]) in text
    assert reverse("submission", args=[small_site[0].pk]) not in text  # an M5 Pro submission
    assert 'class="badge demo"' in text


def test_it_answers_404_for_a_chip_nobody_measured(client: Client, small_site: list[Submission]) -> None:
    response = client.get(reverse("chip", args=["apple-m9-ultra-99c"]))
    assert response.status_code == 404
    text = response.content.decode()
    assert "No results for this chip yet." in text
    assert 'href="/about/#contribute"' in text


def test_it_shows_a_contributor_with_keys_and_submissions_case_insensitively(
    client: Client, small_site: list[Submission], django_assert_max_num_queries: Any
) -> None:
    with django_assert_max_num_queries(4):
        text = page_text(client.get(reverse("contributor", args=["DEMO-ADA"])))
    assert "demo contributor" in text
    assert small_site[0].key.keyid in text
    assert text.count('<a href="/submissions/') == 2
    assert client.get(reverse("contributor", args=["nobody"])).status_code == 404


def test_it_pages_submission_lists_by_cursor_to_the_oldest(
    client: Client, small_site: list[Submission], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(pages, "PAGE_SIZE", 1)
    url = reverse("contributor", args=["demo-ada"])
    seen = []
    query = ""
    for _ in range(5):
        text = page_text(client.get(url + query))
        seen += re.findall(r'<a href="/submissions/([0-9a-f-]{36})/">', text)
        found = re.search(r'<a href="\?before=([^"]+)">older', text)
        if not found:
            break
        query = "?before=" + found.group(1)
    expected = Submission.objects.filter(contributor__handle="demo-ada").order_by("-received_at", "-pk")
    assert seen == [str(s.pk) for s in expected] and len(seen) == 2
    assert '<a href="?">← newest</a>' in text


def test_it_starts_from_the_newest_on_a_malformed_cursor(client: Client, small_site: list[Submission]) -> None:
    url = reverse("contributor", args=["demo-ada"])
    for cursor in ("nonsense", "2026-11-29T10:00:00~not-a-uuid", "2026-11-29T10:00:00~" + str(small_site[0].pk)):
        text = page_text(client.get(url, {"before": cursor}))
        assert text.count('<a href="/submissions/') == 2


def test_it_explains_the_method_and_links_the_api_and_csv(client: Client) -> None:
    text = page_text(client.get(reverse("about")))
    for phrase in (
        "interleaved",
        "paired",
        "median",
        "what your Mac will likely see",
        "A machine is a registered key",
        "degenerate",
        "geometric mean",
    ):
        assert phrase in text.replace("Interleav", "interleav").replace("Paired", "paired")
    assert "benchhub-agent run path/to/model.gguf --server http://testserver --handle you" in text
    assert f"pipx install http://testserver/agent/benchhub_agent-{benchhub_agent.__version__}-py3-none-any.whl" in text
    assert f'href="{reverse("api-docs")}"' in text
    assert f'href="{reverse("measurements-csv")}"' in text


def test_it_compares_two_chips_side_by_side(
    client: Client, small_site: list[Submission], django_assert_max_num_queries: Any
) -> None:
    with django_assert_max_num_queries(8):  # +1: whether demo submissions made the compared cells
        text = page_text(client.get(reverse("compare"), {"a": "apple-m1-8c", "b": "apple-m5-pro-20c"}))
    assert "Apple M1 (8-core GPU) vs Apple M5 Pro (20-core GPU)" in text
    assert '<script id="compare-0" type="application/json">' in text
    assert "(IQ2_XXS) BS8" in text
    islands = text.split('<script id="compare-')[1:]
    charts = [json.loads(island.split('type="application/json">')[1].split("</script>")[0]) for island in islands]
    [chart] = [c for c in charts if "(IQ2_XXS)" in json.dumps(c["layout"]["title"])]
    assert {trace["name"] for trace in chart["data"] if trace["mode"] == "lines+markers"} == {
        "Apple M1 (8-core GPU)",
        "Apple M5 Pro (20-core GPU)",
    }


def test_it_compares_chips_on_the_chosen_variant(client: Client, small_site: list[Submission]) -> None:
    text = page_text(client.get(reverse("compare"), {"a": "apple-m1-8c", "b": "apple-m5-pro-20c", "variant": "01+02"}))
    assert "mv-ext-iquants, 01+02 over upstream" in text
    assert '<option value="01+02" selected>' in text
    assert '<td class="num">excluded</td>' in text  # M1 IQ2_XXS 01+02 failed correctness on its only submission


def test_it_prefills_the_compare_form_from_a_chip_page(client: Client, small_site: list[Submission]) -> None:
    assert 'href="/compare/?a=apple-m1-8c"' in page_text(client.get(reverse("chip", args=["apple-m1-8c"])))
    text = page_text(client.get(reverse("compare"), {"a": "apple-m1-8c"}))
    assert '<option value="apple-m1-8c" selected>' in text


def test_it_compares_two_submissions_side_by_side(client: Client, small_site: list[Submission]) -> None:
    left, right = small_site[0], small_site[2]
    text = page_text(client.get(reverse("compare"), {"a": str(left.pk), "b": str(right.pk)}))
    assert reverse("submission", args=[left.pk]) in text
    assert reverse("submission", args=[right.pk]) in text
    assert "01+02 BS4" in text
    assert "excluded" in text  # the right one's 01+02 failed its correctness check


def test_it_offers_only_crowd_measured_chips_for_comparison(client: Client, small_site: list[Submission]) -> None:
    text = page_text(client.get(reverse("compare")))
    assert '<option value="apple-m1-8c"' in text
    assert '<option value="apple-m3-ultra-60c"' not in text  # published rows only: nothing to compare
    assert page_text(client.get(reverse("chip", args=["apple-m3-ultra-60c"])))  # yet it has a page


def test_it_says_what_to_pick_when_compare_gets_nonsense(client: Client, small_site: list[Submission]) -> None:
    response = client.get(reverse("compare"), {"a": "apple-m1-8c", "b": "not-a-thing"})
    assert response.status_code == 400
    assert (
        "Pick two chips, or two submissions from a chip&#x27;s or a contributor&#x27;s list."
        in response.content.decode()
    )
    assert page_text(client.get(reverse("compare")))  # the empty form
