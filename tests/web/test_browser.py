"""Headless Chromium (Debian's chromium + chromium-driver) over a live server holding the quick-start
data (published rows plus demo submissions through the real ingest), at 1400 px and 390 px: every
chart draws its SVG with every legend entry in view, the console stays clean, pages never scroll
sideways, the ranking and every batch-size column are in view or their table says it scrolls, and
screenshots land in $BENCHHUB_SCREENSHOTS (a temporary folder by default). Issue 33 at both widths:
demo rows marked, variants explained, "check our numbers", the ranking's machines and verdicts and a
chip table's caption and last column in view at 390 px, a CPU run's reason, an empty chart's
message, and a compare view that fits and picks two different submissions. Issue 45 at both widths:
a chip table's cells are compact, with their whole wording as a tooltip and a legend under each table."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.urls import reverse
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import Select, WebDriverWait

from benchhub.results.ingest import ingest_submission, register
from benchhub.results.models import Campaign, Submission
from benchhub.results.tasks import refresh_cells_for_submission
from benchhub.web import charts, demo
from benchhub.web.charts import Point, Series
from tests.conftest import persona, signed_registration, signed_submission

CHROMIUM, CHROMEDRIVER = Path("/usr/bin/chromium"), Path("/usr/bin/chromedriver")
ROOT = Path(__file__).resolve().parents[2]
SHOTS = Path(os.environ.get("BENCHHUB_SCREENSHOTS", Path(tempfile.gettempdir()) / "benchhub-screenshots"))
DESKTOP, PHONE = (1400, 900), (390, 844)


@pytest.fixture(scope="module")
def browser() -> Iterator[webdriver.Chrome]:
    if not (CHROMIUM.exists() and CHROMEDRIVER.exists()):
        pytest.fail("the browser test needs Debian's packages: apt-get install -y chromium chromium-driver")
    profile = tempfile.mkdtemp(prefix="benchhub-chromium-")
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for flag in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--user-data-dir={profile}",
    ):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=options)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


@pytest.fixture
def quick_start_site(transactional_db: None) -> Submission:
    """What `make run` shows: the campaign, `seed_demo` (which also loads the published rows)."""
    from benchhub.results.campaigns import sync_campaigns

    sync_campaigns(Campaign)
    call_command("seed_demo", stdout=StringIO())
    send_a_cpu_run(Campaign.objects.get(slug=demo.CAMPAIGN))
    return Submission.objects.filter(machine__chip="Apple M2").order_by("received_at").first()  # type: ignore[return-value]


CPU_CHIP = "Intel Xeon Gold 6338"


def send_a_cpu_run(campaign: Campaign) -> None:
    """What a Linux machine without a GPU sends to this Metal campaign (issue 33): its rows are
    counted nowhere, and the pages say why."""
    payload = demo.submission_payload(campaign, demo.CHIPS[0], demo.MODELS[2], 7)
    payload["machine"] |= {
        "os": "Linux",
        "os_version": "6.1.0-28-amd64",
        "arch": "x86_64",
        "chip": CPU_CHIP,
        "cpu_cores_performance": 32,
        "cpu_cores_efficiency": 0,
        "gpu_name": "none",
        "gpu_cores": None,
        "backend": "cpu",
    }
    del payload["machine"]["os_build"]
    payload["llama_cpp"]["cmake_flags"] = ["-DGGML_METAL=OFF"]
    payload["llama_cpp"]["compiler"] = "GNU 12.2.0"
    for check in payload["correctness"]:
        check |= {"backend": "CPU", "status": "not_run", "passed": 0, "failed": 0}
        check["reason"] = "a CPU-only build has no second backend to compare against"
    signer = persona("linux-box")
    register(signed_registration(signer, "linux-box"))
    result = ingest_submission(signed_submission(payload, signer))
    refresh_cells_for_submission(result.id)  # as seed_demo does: no worker runs here


def visit(browser: webdriver.Chrome, url: str, size: tuple[int, int], plots: int) -> None:
    browser.get_log("browser")  # drop what earlier pages logged
    browser.set_window_size(*size)
    browser.get(url)
    WebDriverWait(browser, 20).until(
        lambda driver: len(driver.find_elements(By.CSS_SELECTOR, "[data-figure] svg.main-svg")) >= plots
    )
    for plot in browser.find_elements(By.CSS_SELECTOR, "[data-figure]"):
        assert plot.find_elements(By.CSS_SELECTOR, "svg.main-svg"), plot.get_attribute("id")
        # Drawn lines, not an empty frame: a scatter trace layer holds at least one path; a chart
        # with nothing to draw says so inside its frame (issue 33).
        drawn = plot.find_elements(By.CSS_SELECTOR, "g.trace path, g.trace rect, g.points path")
        said = ["".join(n.text.split()) for n in plot.find_elements(By.CSS_SELECTOR, "g.annotation")]
        assert drawn or said == ["".join(charts.EMPTY_MESSAGE.split())], plot.get_attribute("id")
    assert bool(browser.find_elements(By.CSS_SELECTOR, "script[src*='plotly-cartesian']")) == (plots > 0)
    errors = [entry for entry in browser.get_log("browser") if entry["level"] in ("SEVERE", "WARNING")]
    assert errors == [], errors
    overflow = browser.execute_script("return document.documentElement.scrollWidth - window.innerWidth")
    assert overflow <= 0, f"{url} scrolls sideways by {overflow}px at {size[0]}px wide"


def screenshot(browser: webdriver.Chrome, name: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    width = browser.execute_script("return window.innerWidth")
    height = browser.execute_script("return document.documentElement.scrollHeight")
    browser.set_window_size(width, min(height, 4000))
    assert browser.save_screenshot(str(SHOTS / f"{name}.png"))


# Per legend: how many entries plotly drew, how many the figure has, and whether each lies inside
# the plot's box (a legend clipped into its own scrolling box fails the last).
LEGENDS = """
return Array.from(document.querySelectorAll('[data-figure]')).map(function (plot) {
  var box = plot.getBoundingClientRect();
  var entries = Array.from(plot.querySelectorAll('g.legend g.traces'));
  var wanted = plot._fullData.filter(function (t) { return t.showlegend !== false; }).length;
  var inside = entries.every(function (e) {
    var r = e.getBoundingClientRect();
    return r.height > 0 && r.top >= box.top - 1 && r.bottom <= box.bottom + 1 && r.right <= box.right + 1;
  });
  var scrollbar = plot.querySelector('g.legend rect.scrollbar');
  return [entries.length, wanted, inside, scrollbar ? scrollbar.getBoundingClientRect().height : 0];
});
"""

# Per wide table: whether it fits, and otherwise whether its scroll hint shows.
TABLES = """
return Array.from(document.querySelectorAll(arguments[0])).map(function (table) {
  var wrap = table.closest('.table-wrap');
  var hint = wrap.previousElementSibling;
  var fits = wrap.scrollWidth <= wrap.clientWidth + 1;
  var hinted = wrap.classList.contains('scrolls') && hint && hint.classList.contains('scroll-hint') &&
    hint.getBoundingClientRect().height > 0;
  var box = wrap.getBoundingClientRect();
  var headers = Array.from(table.tHead.rows[0].cells).map(function (th) {
    var r = th.getBoundingClientRect();
    return [th.textContent.trim(), r.left >= box.left - 1 && r.right <= box.right + 1];
  });
  return [fits, hinted, headers];
});
"""


def check_legends(browser: webdriver.Chrome) -> None:
    for drawn, wanted, inside, scrollbar in browser.execute_script(LEGENDS):
        assert drawn == wanted and inside and scrollbar == 0, (drawn, wanted, inside, scrollbar)


def check_tables(browser: webdriver.Chrome, selector: str, must_fit: bool) -> None:
    found = browser.execute_script(TABLES, selector)
    assert found, selector
    for fits, hinted, headers in found:
        if must_fit:
            assert fits and all(visible for _, visible in headers), headers
        else:
            assert fits or hinted, headers  # out of view only with a visible affordance


# Issue 33 at a phone's width: the ranking's machines and verdict, and a chip table's caption (also
# once its table is scrolled to the end, where its last column must be in view), inside the screen.
IN_VIEW = """
function inside(el) {
  var r = el.getBoundingClientRect();
  return r.width > 0 && r.height > 0 && r.left >= -1 && r.right <= window.innerWidth + 1;
}
var row = document.querySelector('#ranking tbody tr');
var found = {};
if (row) {
  found.machines = inside(row.querySelector('td.machines'));
  found.verdict = inside(row.querySelector('td.verdict'));
}
var wrap = document.querySelector('table.board') && document.querySelector('table.board').closest('.table-wrap');
if (wrap) {
  var pin = wrap.querySelector('caption .pin');
  found.caption = inside(pin);
  wrap.scrollLeft = wrap.scrollWidth;
  var cells = wrap.querySelector('thead tr').cells;
  var last = cells[cells.length - 1].getBoundingClientRect();
  var box = wrap.getBoundingClientRect();
  found.caption_scrolled = inside(pin);
  found.last_column = last.right <= box.right + 1 && last.left >= cells[0].getBoundingClientRect().right - 1;
  wrap.scrollLeft = 0;
}
return found;
"""


# Issue 45: a chip table's cell is the pair, a compact interval and the verdict, never the sentences;
# those are its tooltip and the legend said once under each table of crowd rows.
COMPACT = """
var cells = Array.from(document.querySelectorAll('table.board td.measured[title]'));
return {
  cells: cells.length,
  tallest: Math.max.apply(null, cells.map(function (td) {
    var content = document.createRange();  // the cell's own lines: a row is as tall as its tallest cell
    content.selectNodeContents(td);
    var extra = td.querySelectorAll('.detail').length - 2;  // pending machines, exclusions: one line each
    return content.getBoundingClientRect().height / parseFloat(getComputedStyle(td).fontSize) - 1.2 * extra;
  })),
  worded: cells.filter(function (td) { return /machine/.test(td.title); }).length,
  tables: Array.from(document.querySelectorAll('table.board')).filter(function (t) {
    return t.querySelector('td.measured[title]');
  }).length,
  legends: document.querySelectorAll('p.legend').length
};
"""


def check_compact_cells(browser: webdriver.Chrome) -> None:
    found = browser.execute_script(COMPACT)
    assert found["cells"] and found["worded"] == found["cells"], found
    # The pair (it may wrap before its change) and two short lines: not six lines of sentences (8 em and more).
    assert found["tallest"] <= 6, found
    assert found["legends"] == found["tables"], found


def check_explained(browser: webdriver.Chrome) -> None:
    """Issue 33: demo rows say so and the variants are explained."""
    assert browser.find_element(By.CSS_SELECTOR, ".notice.demo").is_displayed()
    assert [b for b in browser.find_elements(By.CSS_SELECTOR, "table .badge.demo") if b.is_displayed()]
    notes = browser.find_element(By.CSS_SELECTOR, "dl.variant-notes")
    assert notes.is_displayed() and "Patch 01" in notes.text


def test_it_draws_every_page_in_headless_chromium(
    browser: webdriver.Chrome, live_server: Any, quick_start_site: Submission
) -> None:
    base = live_server.url
    for size, tag in ((DESKTOP, "1400"), (PHONE, "390")):
        visit(browser, base + "/", size, plots=1)
        check_legends(browser)
        check_tables(browser, "table.ranking", must_fit=size == DESKTOP)  # at 390 px one card per line: IN_VIEW
        check_explained(browser)
        assert browser.execute_script(IN_VIEW) == {"machines": True, "verdict": True}
        check = browser.find_element(By.ID, "check-h").find_element(By.XPATH, "..")
        assert check.find_element(By.LINK_TEXT, "snapshot").get_attribute("href").endswith("/api/v1/snapshot/")
        assert "scripts/recompute_cells.py --server" in check.text
        screenshot(browser, f"home-{tag}")

        visit(browser, base + reverse("chip", args=["apple-m5-pro-20c"]), size, plots=3)
        check_legends(browser)
        check_tables(browser, "table.board", must_fit=size == DESKTOP)  # BS1 to BS16 and BS8/BS1 in view
        headers = browser.execute_script(TABLES, "table.board")[0][2]
        assert [text for text, _ in headers][1:10] == [f"BS{bs}" for bs in (1, 2, 3, 4, 5, 8, 9, 12, 16)]
        check_explained(browser)
        in_view = browser.execute_script(IN_VIEW)
        assert in_view == {"caption": True, "caption_scrolled": True, "last_column": True}, in_view
        screenshot(browser, f"chip-{tag}")
        check_compact_cells(browser)

        visit(browser, base + reverse("submission", args=[quick_start_site.pk]), size, plots=2)
        assert browser.find_element(By.CSS_SELECTOR, "button.copy").get_attribute("hidden") is None
        assert "1.72 B parameters" in browser.find_element(By.TAG_NAME, "body").text  # demo.py: 1,720,574,976
        screenshot(browser, f"submission-{tag}")

        compare = f"{reverse('compare')}?a=apple-m1-8c&b=apple-m5-pro-20c"
        visit(browser, base + compare, size, plots=3)
        check_legends(browser)
        if size == DESKTOP:
            check_tables(browser, "table.compare", must_fit=True)  # both chips' columns in view
        first, second = (Select(browser.find_element(By.ID, f"sub-{side}")) for side in "ab")
        assert first.first_selected_option.text != second.first_selected_option.text
        screenshot(browser, f"compare-chips-{tag}")

        visit(browser, base + reverse("contributor", args=["demo-ada"]), size, plots=0)
        ids = [e.text for e in browser.find_elements(By.CSS_SELECTOR, "table th[scope=row] code")]
        assert len(ids) >= 2 and len(set(ids)) == len(ids), ids  # short ids that differ
        screenshot(browser, f"contributor-{tag}")

        # The CPU run on the Metal campaign: a control, out of the ranking; its line among the
        # controls and its chip page say why it counts nowhere, and its empty chart says so.
        visit(browser, base + "/?quant=q4_k_m", size, plots=1)
        assert CPU_CHIP not in browser.find_element(By.ID, "ranking").text
        line = browser.find_element(By.XPATH, f"//table[@id='controls']//tr[contains(., '{CPU_CHIP}')]")
        assert "control: the patches do not touch CPU" in line.text
        assert "excluded: CPU backend on a Metal campaign" in line.find_element(By.CSS_SELECTOR, "td.machines").text
        visit(browser, base + reverse("chip", args=["intel-xeon-gold-6338"]), size, plots=1)
        caption = browser.find_element(By.CSS_SELECTOR, "table.board caption").text
        assert "excluded: CPU backend on a Metal campaign" in caption
        said = ["".join(a.text.split()) for a in browser.find_elements(By.CSS_SELECTOR, "g.annotation")]
        assert said == ["".join(charts.EMPTY_MESSAGE.split())]  # its two lines, as drawn
        box = browser.find_element(By.CSS_SELECTOR, "[data-figure]").rect
        for text in browser.find_elements(By.CSS_SELECTOR, "g.annotation text"):
            assert box["x"] <= text.rect["x"] and text.rect["x"] + text.rect["width"] <= box["x"] + box["width"] + 1
        screenshot(browser, f"cpu-chip-{tag}")

    visit(browser, base + "/?campaign=few-row-mma", PHONE, plots=1)
    visit(browser, base + reverse("about"), PHONE, plots=0)
    screenshot(browser, "about-390")


def test_it_sorts_filters_and_searches_the_ranking_and_copies_markdown(
    browser: webdriver.Chrome, live_server: Any, quick_start_site: Submission
) -> None:
    visit(browser, live_server.url + "/", DESKTOP, plots=1)
    rows = browser.find_elements(By.CSS_SELECTOR, "#ranking tbody tr")
    # The server orders lines by evidence (test_pages checks it); a click sorts by the figure.
    figures = [float(r.find_element(By.CSS_SELECTOR, "td.headline").get_attribute("data-value")) for r in rows]
    for expected in (sorted(figures, reverse=True), sorted(figures)):
        browser.find_element(By.XPATH, "//table[@id='ranking']//th[contains(., 'speedup')]/button").click()
        rows = browser.find_elements(By.CSS_SELECTOR, "#ranking tbody tr")
        assert [float(r.find_element(By.CSS_SELECTOR, "td.headline").get_attribute("data-value")) for r in rows] == (
            expected
        )

    search = browser.find_element(By.ID, "ranking-search")
    assert search.is_displayed()
    search.send_keys("m4 pro")
    shown = [r.text for r in browser.find_elements(By.CSS_SELECTOR, "#ranking tbody tr") if r.is_displayed()]
    assert shown and all("M4 Pro" in text for text in shown)
    search.clear()
    search.send_keys(" ")  # input event with no words: every line again

    Select(browser.find_element(By.ID, "ranking-quant")).select_by_value("iq3_xxs")
    shown = [r.text for r in browser.find_elements(By.CSS_SELECTOR, "#ranking tbody tr") if r.is_displayed()]
    assert shown and all("IQ3_XXS" in text for text in shown)

    copy = browser.find_element(By.CSS_SELECTOR, "button.copy")
    browser.find_element(By.CSS_SELECTOR, "details.markdown-export summary").click()
    assert copy.is_displayed()
    markdown = browser.find_element(By.ID, "markdown-campaign").get_attribute("value") or ""
    assert markdown.startswith("**mv-ext-iquants: 01 over upstream") and "| Apple M5 Pro (20-core GPU) |" in markdown


def test_it_picks_two_submissions_by_name_and_draws_a_legend_that_says_which_is_which(
    browser: webdriver.Chrome, live_server: Any, quick_start_site: Submission
) -> None:
    visit(browser, live_server.url + reverse("compare"), DESKTOP, plots=0)
    Select(browser.find_element(By.ID, "from")).select_by_value("contributor:demo-ada")
    browser.find_element(By.XPATH, "//button[text()='List them']").click()
    WebDriverWait(browser, 10).until(lambda driver: driver.find_elements(By.ID, "sub-b"))
    first, second = (Select(browser.find_element(By.ID, f"sub-{side}")) for side in "ab")
    assert first.first_selected_option.text != second.first_selected_option.text
    assert "demo-ada" in first.first_selected_option.text
    browser.find_element(By.XPATH, "//button[text()='Compare submissions']").click()
    WebDriverWait(browser, 20).until(lambda driver: driver.find_elements(By.CSS_SELECTOR, "[data-figure] g.legend"))
    check_legends(browser)
    names = [e.text for e in browser.find_elements(By.CSS_SELECTOR, "g.legend text.legendtext")]
    assert any(n.startswith("A ") for n in names) and any(n.startswith("B ") for n in names)
    dashes = browser.execute_script(
        "return document.querySelector('[data-figure]')._fullData.map(function (t) { return [t.name, t.line.dash]; })"
    )
    assert {dash for name, dash in dashes if name.startswith("A ")} == {"solid"}
    assert {dash for name, dash in dashes if name.startswith("B ")} == {"dash"}
    title = browser.find_element(By.CSS_SELECTOR, "g.infolayer .gtitle").text
    assert "A solid, B dashed" in title
    screenshot(browser, "compare-submissions-1400")


def test_it_draws_the_api_docs_from_this_host_only_under_the_csp(browser: webdriver.Chrome, live_server: Any) -> None:
    """Issue 25: Swagger UI from drf-spectacular-sidecar, nothing from another host, no CSP violation."""
    browser.get_log("browser")
    browser.set_window_size(*DESKTOP)
    browser.get(live_server.url + reverse("api-docs"))
    WebDriverWait(browser, 30).until(lambda driver: driver.find_elements(By.CSS_SELECTOR, ".opblock-summary-path"))
    assert "benchhub API" in browser.find_element(By.CSS_SELECTOR, ".info .title").text
    loaded = browser.execute_script("return performance.getEntriesByType('resource').map(entry => entry.name)")
    assert loaded and [url for url in loaded if not url.startswith((live_server.url, "data:"))] == []
    errors = [entry for entry in browser.get_log("browser") if entry["level"] in ("SEVERE", "WARNING")]
    assert errors == [], errors


def test_plotly_shows_a_name_holding_a_link_as_its_text(
    browser: webdriver.Chrome, live_server: Any, tmp_path: Path
) -> None:
    """Issue 25: a chip named `<a href=...>` was a live link in a legend; drawn by the vendored
    plotly.js from charts.py's figure, it is the name as typed, and no link."""
    name = '<a href="https://evil.example/">Apple M5</a> %{y}'
    figure = charts.speedup_figure([Series(name, (Point(1, 1.2), Point(4, 1.3)))], f"{name}: 01 over upstream")
    [plotly] = (ROOT / "static" / "vendor").glob("plotly-*.min.js")
    page = tmp_path / "chart.html"
    page.write_text(
        f'<div id="plot" style="width:800px;height:500px"></div><script src="{live_server.url}/static/vendor/'
        f'{plotly.name}"></script><script>const f = {json.dumps(figure)}; Plotly.newPlot("plot", f.data, f.layout);'
        "</script>"
    )
    browser.get(page.as_uri())
    WebDriverWait(browser, 20).until(lambda driver: driver.find_elements(By.CSS_SELECTOR, ".legendtext"))
    assert [text.text for text in browser.find_elements(By.CSS_SELECTOR, ".legendtext")] == [name]
    assert browser.find_element(By.CSS_SELECTOR, ".gtitle").text == f"{name}: 01 over upstream"
    assert browser.find_elements(By.CSS_SELECTOR, "svg a") == []
