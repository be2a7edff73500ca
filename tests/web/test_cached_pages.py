"""The home and chip pages serve their boards from the cache under the cells' version: what they
serve is what they would render without the cache, a refreshed cell shows at once with the
staleness bound at 0 and within the bound otherwise (one render per bound, however many requests
arrive meanwhile), the parts read per request (query parameters, the submissions list) still change
the page, and an unreachable cache costs nothing but the render."""

from __future__ import annotations

import hashlib
import time
from datetime import timedelta
from typing import Any

import pytest
from django.core.cache import cache
from django.db import connection
from django.db.models import Max
from django.test import Client
from django.test.utils import CaptureQueriesContext

from benchhub.results import readcache
from benchhub.results.board import Group
from benchhub.results.cells import refresh_group
from benchhub.results.ingest import ingest_submission
from benchhub.results.models import Campaign, LeaderboardCell, Submission
from benchhub.results.readcache import cached_render, cells_version
from benchhub.web import demo

from .helpers import IQ2, IQ3, M1, M5_PRO, ingest_runs, page_text

pytestmark = pytest.mark.django_db

CHIP_PAGE = "/chips/apple-m1-8c/"
UNCACHED = {"default": {"BACKEND": "django.core.cache.backends.dummy.DummyCache"}}
UNREACHABLE = {
    "default": {
        "BACKEND": "django.core.cache.backends.redis.RedisCache",
        "LOCATION": "redis://127.0.0.1:1/0",  # nothing listens on port 1
        "OPTIONS": {"socket_connect_timeout": 1.0, "socket_timeout": 1.0},
    }
}


class Clock:
    """readcache's clock, moved by the test instead of by sleeping."""

    def __init__(self) -> None:
        self.now = time.time()

    def __call__(self) -> float:
        return self.now


def stale_within(seconds: float, settings: Any, monkeypatch: pytest.MonkeyPatch) -> Clock:
    """The staleness bound at `seconds` on a clock the test moves, and an empty cache: a board an
    earlier test rendered from the same inputs (another version, moments ago) would be served."""
    settings.BENCHHUB_BOARD_MAX_STALENESS_SECONDS = seconds
    clock = Clock()
    monkeypatch.setattr(readcache, "now", clock)
    cache.clear()
    return clock


def _get(client: Client, url: str, **params: str) -> tuple[str, int]:
    """The page's text and how many queries it took."""
    with CaptureQueriesContext(connection) as queries:
        text = page_text(client.get(url, params))
    return text, len(queries)


def _table(text: str, caption: str) -> str:
    start = text.index(caption)
    return text[start : text.index("</table>", start)]


@pytest.mark.parametrize("url", ["/", CHIP_PAGE])
def test_it_serves_from_the_cache_the_page_it_would_render_without_it(
    client: Client, small_site: list[Submission], settings: Any, url: str
) -> None:
    rendered, rendering_queries = _get(client, url)
    cached, cached_queries = _get(client, url)
    assert cached_queries < rendering_queries  # the second board came from the cache: no cells read
    settings.CACHES = UNCACHED
    uncached, _ = _get(client, url)
    assert cached == rendered == uncached


M1_IQ3 = f"Apple M1 (8-core GPU)</a> · {IQ3.label} (IQ3_XXS)"
M1_IQ3_LINE = f'Apple M1 (8-core GPU)</a><span class="model">{IQ3.label} (IQ3_XXS)'
# What dina's M1 IQ3_XXS run changes: the ranking's line of 01 (chen's 01 was degenerate) and the
# chip table's 01+02 cell (chen's run and dina's).
CHANGED = {"/": "1 machine<", "/chips/apple-m1-8c/": "2 submissions, 2 contributors"}


def _board(text: str, url: str) -> str:
    """The part of the page that shows the M1 IQ3_XXS cells: the chip's table, or the ranking's line."""
    if url != "/":
        return _table(text, M1_IQ3)
    start = text.index(M1_IQ3_LINE)
    return text[start : text.index("</tr>", start)]


IQ3_MODEL = {"model": hashlib.sha256(f"demo-model:{IQ3.label}".encode()).hexdigest()}  # as demo.py names it
DINA_M1_IQ3 = demo.DemoRun("demo-dina", M1, IQ3, 1, demo.Trouble())


def test_it_shows_a_refreshed_cell_on_the_home_and_chip_pages_at_once(
    client: Client, small_site: list[Submission], live_campaign: Campaign, settings: Any
) -> None:
    settings.BENCHHUB_BOARD_MAX_STALENESS_SECONDS = 0
    home, chip = page_text(client.get("/", IQ3_MODEL)), page_text(client.get(CHIP_PAGE))
    assert page_text(client.get("/", IQ3_MODEL)) == home  # served again, from the cache
    assert CHANGED["/"] not in _board(home, "/")
    assert CHANGED[CHIP_PAGE] not in _board(chip, CHIP_PAGE)

    ingest_runs(live_campaign, [DINA_M1_IQ3])

    for url, before in (("/", home), (CHIP_PAGE, chip)):
        after = page_text(client.get(url, IQ3_MODEL if url == "/" else {}))
        assert CHANGED[url] in _board(after, url)
        assert _board(after, url) != _board(before, url)


@pytest.mark.parametrize("url", ["/", CHIP_PAGE])
def test_it_serves_a_changed_board_as_rendered_within_the_bound_and_renders_it_again_past_it(
    client: Client,
    small_site: list[Submission],
    live_campaign: Campaign,
    settings: Any,
    monkeypatch: pytest.MonkeyPatch,
    url: str,
) -> None:
    clock = stale_within(5, settings, monkeypatch)
    params = IQ3_MODEL if url == "/" else {}
    served = _board(page_text(client.get(url, params)), url)
    assert CHANGED[url] not in served

    ingest_runs(live_campaign, [DINA_M1_IQ3])
    clock.now += 4.9
    assert _board(page_text(client.get(url, params)), url) == served  # the cells' version moved, the board did not

    clock.now += 0.1
    renewed = _board(page_text(client.get(url, params)), url)
    assert CHANGED[url] in renewed
    clock.now += 4.9
    assert _board(page_text(client.get(url, params)), url) == renewed  # kept again, under the new version


def test_it_renders_a_stale_board_once_while_other_requests_arrive_during_the_render(
    small_site: list[Submission], live_campaign: Campaign, settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = stale_within(5, settings, monkeypatch)
    cells = LeaderboardCell.objects.filter(campaign=live_campaign)
    renders: list[str] = []

    def render(name: str) -> str:
        renders.append(name)
        return name

    assert cached_render("board", "inputs", cells, lambda: render("first")) == "first"
    ingest_runs(live_campaign, [DINA_M1_IQ3])
    clock.now += 60

    def render_while_others_arrive() -> str:
        # Requests arriving while this one renders serve the board as it was, rather than render it too.
        assert [cached_render("board", "inputs", cells, lambda: render("again")) for _ in range(3)] == ["first"] * 3
        return render("second")

    assert cached_render("board", "inputs", cells, render_while_others_arrive) == "second"
    assert cached_render("board", "inputs", cells, lambda: render("third")) == "second"
    assert renders == ["first", "second"]


def test_it_renders_every_changed_board_with_the_bound_at_0(
    small_site: list[Submission], live_campaign: Campaign, settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = stale_within(0, settings, monkeypatch)
    cells = LeaderboardCell.objects.filter(campaign=live_campaign)
    assert cached_render("board", "inputs", cells, lambda: "first") == "first"
    assert cached_render("board", "inputs", cells, lambda: "unchanged cells") == "first"
    ingest_runs(live_campaign, [DINA_M1_IQ3])
    clock.now -= 1  # as read by a process whose clock is behind the one that rendered "first"
    assert cached_render("board", "inputs", cells, lambda: "second") == "second"


def test_it_sees_a_refresh_that_commits_after_a_later_one(
    small_site: list[Submission], live_campaign: Campaign
) -> None:
    """Two groups refreshed at once: the one that began first commits last, with older timestamps
    than cells already read. The newest updated_at alone would not move; the version must."""
    board = LeaderboardCell.objects.filter(campaign=live_campaign)
    iq2_sha256 = hashlib.sha256(f"demo-model:{IQ2.label}".encode()).hexdigest()
    m5_iq2 = Group(live_campaign.pk, M5_PRO.chip, M5_PRO.gpu_cores, iq2_sha256, "metal")
    newest = board.aggregate(newest=Max("updated_at"))["newest"]
    assert LeaderboardCell.objects.filter(**m5_iq2.filter()).aggregate(last=Max("updated_at"))["last"] < newest
    ingest_submission(demo.signed_demo_run(live_campaign, demo.DemoRun("demo-ada", M5_PRO, IQ2, 2, demo.Trouble())))
    before = cells_version(board)

    refresh_group(m5_iq2)
    # The timestamps it would carry had it begun before the newest refresh committed.
    LeaderboardCell.objects.filter(**m5_iq2.filter()).update(updated_at=newest - timedelta(milliseconds=1))

    assert board.aggregate(newest=Max("updated_at"))["newest"] == newest
    assert cells_version(board) != before


def test_it_still_reads_query_parameters_and_the_submissions_list_per_request(
    client: Client, small_site: list[Submission]
) -> None:
    first, second = page_text(client.get("/")), page_text(client.get("/", {"variant": "01+02"}))
    assert "(IQ2_XXS): 01 over upstream, by chip" in first
    assert "(IQ2_XXS): 01+02 over upstream, by chip" in second
    assert '<option value="01+02" selected>' in second
    assert "(IQ2_XXS): 01 over upstream, by chip" in page_text(client.get("/"))
    assert "Apple M3 Ultra (60-core GPU) <span" not in first
    assert "Apple M3 Ultra (60-core GPU) <span" in page_text(client.get("/", {"campaign": "few-row-mma"}))
    only_iq3 = page_text(client.get("/", {"quant": "iq3_xxs"}))  # the ranking's quant filter, any case
    assert "(IQ3_XXS)</span>" in only_iq3 and "(IQ2_XXS)</span>" not in only_iq3

    m1 = sorted((s for s in small_site if s.machine.chip == M1.chip), key=lambda s: (s.received_at, s.pk))
    newest, older = m1[-1], m1[0]
    page_text(client.get(CHIP_PAGE))  # the board is cached now
    listed = page_text(client.get(CHIP_PAGE, {"before": f"{newest.received_at.isoformat()}~{newest.pk}"}))
    assert f"/submissions/{newest.pk}/" not in listed
    assert f"/submissions/{older.pk}/" in listed


@pytest.mark.parametrize("bound", [0, 5])
@pytest.mark.parametrize("url", ["/", CHIP_PAGE])
def test_it_renders_the_pages_while_the_cache_is_unreachable(
    client: Client, small_site: list[Submission], settings: Any, monkeypatch: pytest.MonkeyPatch, url: str, bound: float
) -> None:
    stale_within(bound, settings, monkeypatch)
    served = page_text(client.get(url))
    settings.CACHES = UNREACHABLE
    assert page_text(client.get(url)) == served


def test_it_never_serves_a_board_rendered_by_another_release(
    small_site: list[Submission], live_campaign: Campaign, settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    stale_within(5, settings, monkeypatch)
    cells = LeaderboardCell.objects.filter(campaign=live_campaign)
    assert cached_render("board", "inputs", cells, lambda: "old release") == "old release"
    assert cached_render("board", "inputs", cells, lambda: "unchanged") == "old release"
    monkeypatch.setattr(readcache, "CODE_VERSION", "a-new-release")
    assert cached_render("board", "inputs", cells, lambda: "new release") == "new release"
