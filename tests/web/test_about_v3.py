"""The About page states what the verdicts mean and what the evidence rules are, from the data the
service runs on (issue 35's five sentences and live control rate; issue 30's bandwidth table,
probation period and plausible range)."""

from __future__ import annotations

import csv
import html
import re
from typing import Any

import pytest
from benchhub_protocol import envelope
from django.test import Client
from django.urls import reverse

from benchhub.results import plausibility
from benchhub.web import words
from tests.conftest import Api

from . import v3_site
from .helpers import page_text
from .v3_site import judge

pytestmark = pytest.mark.django_db


def about(client: Client) -> str:
    return html.unescape(page_text(client.get(reverse("about"))))


def test_it_explains_the_verdict_words_in_five_sentences(client: Client, campaign: Any) -> None:
    text = about(client)
    section = text[text.index('id="verdicts"') : text.index("</p>", text.index('id="verdicts"'))]
    assert words.ABOUT_VERDICTS in section
    assert len(re.findall(r"[.!?](?:\s|$)", words.ABOUT_VERDICTS)) == 5, "five sentences"
    for word in ('"faster"', '"slower"', '"within ±2%"', '"unclear"', '"too few machines"'):
        assert word in section
    assert "no clear change" not in text and "95% CI" not in text


def test_it_shows_the_bandwidth_table_the_probation_and_the_plausible_range(
    client: Client, campaign: Any, settings: Any
) -> None:
    settings.BENCHHUB_KEY_PROBATION_S = 86400
    text = about(client)
    with plausibility.TABLE.open(newline="", encoding="utf-8") as handle:
        table = list(csv.DictReader(handle))
    assert len(table) >= 20
    for row in table:
        shown = f'<th scope="row">{row["chip"]}</th><td class="num">{float(row["gb_per_s"]):g}</td>'
        assert shown in text and row["source"] in text
    assert "younger than <strong>24 hours</strong>" in text
    assert '<th scope="row">mv-ext-iquants</th><td>2%</td><td>0.333× to 3×</td><td>Metal</td>' in text
    settings.BENCHHUB_KEY_PROBATION_S = 0
    assert "younger than <strong>off</strong>" not in about(client)  # off is said plainly
    assert "probation is off" in about(client)


def test_it_shows_the_live_false_verdict_rate_of_the_controls(
    client: Client, api: Api, ada: envelope.Signer, personas: dict[str, envelope.Signer]
) -> None:
    assert "No control group has a verdict yet." in about(client)
    v3_site.build(api, personas)
    judge({"backend": "cuda", "variant": "01"}, verdict="faster")
    judge({"backend": "metal", "variant": "01"}, verdict="faster")  # evidence, not a control: not counted
    text = about(client)
    assert "1 of 1 control group (100.0%) show a “faster” or “slower”; per cell, 1 of 1 (100.0%)." in text
    assert 'class="control-rate over"' in text  # above the 5% the method promises
    judge({"backend": "cuda", "variant": "01"}, verdict="within")
    text = about(client)
    assert "0 of 1 control group (0.0%)" in text and 'class="control-rate"' in text
