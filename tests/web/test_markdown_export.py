"""The Markdown a patch author pastes into a PR (benchhub_protocol.markdown), and the "Copy as
Markdown" text of the campaign, chip and submission pages: parsed as GitHub tables by markdown-it."""

from __future__ import annotations

import html
import re

import pytest
from benchhub_protocol import markdown
from django.test import Client
from django.urls import reverse
from markdown_it import MarkdownIt

from benchhub.results.models import Submission

from .helpers import page_text

PARSER = MarkdownIt("commonmark").enable("table")


def table_of(text: str) -> tuple[list[str], list[list[str]]]:
    """The header and the body rows of the one table the text holds, as a Markdown renderer sees it."""
    tokens = PARSER.parse(text)
    assert [t.type for t in tokens].count("table_open") == 1, text
    header: list[str] = []
    rows: list[list[str]] = []
    section = None
    for token in tokens:
        if token.type in ("thead_open", "tbody_open"):
            section = token.type
        elif token.type in ("thead_close", "tbody_close"):
            section = None
        elif token.type == "tr_open" and section == "tbody_open":
            rows.append([])
        elif token.type == "inline" and section == "thead_open":
            header.append(token.content)
        elif token.type == "inline" and section == "tbody_open":
            rows[-1].append(token.content)
    return header, rows


def test_it_writes_the_seeds_form_with_machines_interval_kind_and_permalink() -> None:
    lines = [
        markdown.Line(
            "Apple M5 Pro (20-core GPU)",
            [markdown.Cell(4, 148.0, 209.9, None, 3, "range"), markdown.Cell(8, 137.7, 237.7, 1.726, 3, "range")],
        ),
        markdown.Line("Apple M1 | 8-core", [markdown.Cell(4, 71.5, 90.3, None, 7, "95%")]),
        markdown.Line("my Mac", [markdown.Cell(4, 71.5, 90.3)]),
    ]
    text = markdown.table(lines, title="mv-ext-iquants: 01 over upstream", permalink="https://bench.example/?m=1")
    header, rows = table_of(text)
    assert header == ["", "machines", "interval", "BS4", "BS8"]
    assert rows[0] == [
        "Apple M5 Pro (20-core GPU)",
        "3 machines",
        "range of 3 machines",
        "148.0→209.9 (+42%)",
        "137.7→237.7 (+73%)",
    ]
    assert rows[1][:4] == ["Apple M1 | 8-core", "7 machines", "95% interval", "71.5→90.3 (+26%)"]
    assert rows[1][4] == ""  # no BS8 for that line: an empty cell, never a made-up one
    assert rows[2][1:3] == ["1 machine", "none (1 machine)"]
    assert "https://bench.example/?m=1" in PARSER.render(text)


def test_it_turns_an_agent_run_into_the_same_table() -> None:
    """What `benchhub-agent run` prints at the end: its report.cells() rows, one machine; a change only with
    its interval and verdict (issue 44: the Markdown once said "+18%" where the table said "unclear")."""
    rows = [
        {"variant": "upstream", "batch_size": 4, "tg_tps": 148.0, "baseline_tg_tps": 148.0, "speedup": 1.0},
        {
            "variant": "01",
            "batch_size": 4,
            "tg_tps": 209.9,
            "baseline_tg_tps": 148.0,
            "speedup": 209.9 / 148.0,
            "ci_low": 1.38,
            "ci_high": 1.455,
            "verdict": "faster",
        },
        {"variant": "01", "batch_size": 2, "tg_tps": 100.0, "baseline_tg_tps": 90.0, "speedup": None},
        {"variant": "01", "batch_size": 8, "tg_tps": None, "baseline_tg_tps": 137.7, "speedup": None},
    ]
    lines = markdown.lines_of_run(rows, "upstream")
    header, body = table_of(markdown.table(lines, title="Apple M1 (8-core GPU), run", permalink="https://x/s/1/"))
    assert header == ["", "machines", "interval", "BS2", "BS4"]
    assert body == [
        [
            "01",
            "1 machine",
            "95%, every look interval / none (1 machine)",
            "90.0→100.0 (no whole cycle)",
            "148.0→209.9 (+42%) [+38% to +46%] faster",
        ]
    ]


def _markdown_on(text: str, name: str) -> str:
    found = re.search(rf'<textarea id="markdown-{name}"[^>]*>(.*?)</textarea>', text, re.S)
    assert found, name
    return html.unescape(found.group(1))


@pytest.mark.django_db
def test_it_offers_every_campaign_chip_and_submission_as_a_markdown_table(
    client: Client, small_site: list[Submission]
) -> None:
    header, rows = table_of(_markdown_on(page_text(client.get("/")), "campaign"))
    assert header[:5] == ["", "machines", "interval", "BS1", "BS2"] and "BS16" in header
    m5 = next(row for row in rows if row[0] == "Apple M5 Pro (20-core GPU)")
    assert m5[1:3] == ["2 machines", "none (2 machines)"]
    verdicts = "faster|slower|within ±2%|unclear|too few machines"
    form = rf"\d+\.\d→\d+\.\d \([+−](\d+|0\.\d+)%\) ({verdicts})|"
    malformed = [value for value in m5[3:] if not re.fullmatch(form, value)]
    assert malformed == []

    chip_text = _markdown_on(page_text(client.get(reverse("chip", args=["apple-m1-8c"]))), "chip")
    _, chip_rows = table_of(chip_text)
    assert {row[0] for row in chip_rows} >= {"mv-ext-iquants: Qwen3-1.7B IQ3_XXS (IQ3_XXS), 01+02"}
    assert "http://testserver/chips/apple-m1-8c/" in chip_text

    submission = small_site[0]
    page = page_text(client.get(reverse("submission", args=[submission.pk])))
    sub_text = _markdown_on(page, "submission")
    _, sub_rows = table_of(sub_text)
    assert [row[0] for row in sub_rows] == ["01", "01+02"]
    assert {row[1] for row in sub_rows} == {"1 machine"} and {row[2] for row in sub_rows} == {"none (1 machine)"}
    assert f"http://testserver/submissions/{submission.pk}/" in sub_text
    assert str(submission.pk)[-8:] in sub_text  # the short id that differs: the UUID's random tail
