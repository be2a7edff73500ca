"""Headless Chromium (Debian's chromium + chromium-driver) over a live server holding the quick-start
data (published rows plus demo submissions through the real ingest): every chart draws its SVG, the
console stays clean, phone-width pages never scroll sideways, and screenshots land in test-artifacts/."""

from __future__ import annotations

import json
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
from selenium.webdriver.support.ui import WebDriverWait

from benchhub.results.models import Campaign, Submission
from benchhub.web import charts
from benchhub.web.charts import Point, Series

CHROMIUM, CHROMEDRIVER = Path("/usr/bin/chromium"), Path("/usr/bin/chromedriver")
ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "test-artifacts"
DESKTOP, PHONE = (1280, 900), (390, 844)


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
    return Submission.objects.filter(machine__chip="Apple M2").order_by("received_at").first()  # type: ignore[return-value]


def visit(browser: webdriver.Chrome, url: str, size: tuple[int, int], shot: str, plots: int) -> None:
    browser.get_log("browser")  # drop what earlier pages logged
    browser.set_window_size(*size)
    browser.get(url)
    WebDriverWait(browser, 20).until(
        lambda driver: len(driver.find_elements(By.CSS_SELECTOR, "[data-figure] svg.main-svg")) >= plots
    )
    for plot in browser.find_elements(By.CSS_SELECTOR, "[data-figure]"):
        assert plot.find_elements(By.CSS_SELECTOR, "svg.main-svg"), plot.get_attribute("id")
        # Drawn lines, not an empty frame: a scatter trace layer holds at least one path.
        assert plot.find_elements(By.CSS_SELECTOR, "g.trace path, g.trace rect, g.points path"), plot.get_attribute(
            "id"
        )
    errors = [entry for entry in browser.get_log("browser") if entry["level"] in ("SEVERE", "WARNING")]
    assert errors == [], errors
    overflow = browser.execute_script("return document.documentElement.scrollWidth - window.innerWidth")
    assert overflow <= 0, f"{url} scrolls sideways by {overflow}px at {size[0]}px wide"
    ARTIFACTS.mkdir(exist_ok=True)
    height = browser.execute_script("return document.documentElement.scrollHeight")
    browser.set_window_size(size[0], min(height, 4000))
    assert browser.save_screenshot(str(ARTIFACTS / f"{shot}.png"))


def test_it_draws_every_page_in_headless_chromium(
    browser: webdriver.Chrome, live_server: Any, quick_start_site: Submission
) -> None:
    base = live_server.url
    visit(browser, base + "/", DESKTOP, "home-desktop", plots=3)
    visit(browser, base + "/", PHONE, "home-phone", plots=3)
    visit(browser, base + reverse("chip", args=["apple-m5-pro-20c"]), DESKTOP, "chip-desktop", plots=3)
    visit(browser, base + reverse("submission", args=[quick_start_site.pk]), DESKTOP, "submission-desktop", plots=2)
    visit(browser, base + reverse("submission", args=[quick_start_site.pk]), PHONE, "submission-phone", plots=2)
    compare = f"{reverse('compare')}?a=apple-m1-8c&b=apple-m5-pro-20c"
    visit(browser, base + compare, DESKTOP, "compare-desktop", plots=3)
    visit(browser, base + compare, PHONE, "compare-phone", plots=3)
    visit(browser, base + reverse("contributor", args=["demo-ada"]), PHONE, "contributor-phone", plots=0)
    visit(browser, base + "/?campaign=few-row-mma", PHONE, "few-row-mma-phone", plots=1)
    visit(browser, base + reverse("about"), PHONE, "about-phone", plots=0)


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
