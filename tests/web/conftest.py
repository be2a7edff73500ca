"""Web fixtures: sites built through the real signed ingest path (see helpers.py)."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import call_command

from benchhub.results.campaigns import sync_campaigns
from benchhub.results.models import Campaign, Submission
from benchhub.web import demo

from .helpers import IQ2, IQ3, M1, M5_PRO, ingest_runs


@pytest.fixture
def live_campaign(db: None) -> Campaign:
    """The campaign row the migrations create; synced again because transactional tests flush it."""
    sync_campaigns(Campaign)
    return Campaign.objects.get(slug=demo.CAMPAIGN)


@pytest.fixture
def small_site(live_campaign: Campaign) -> list[Submission]:
    """Two chips, two contributors on the M5 Pro, one IQ3_XXS run whose 01 output loops, and the
    published reference rows."""
    call_command("load_reference_rows", stdout=StringIO())
    return ingest_runs(
        live_campaign,
        [
            demo.DemoRun("demo-ada", M5_PRO, IQ2, 0, demo.Trouble()),
            demo.DemoRun("demo-bashir", M5_PRO, IQ2, 1, demo.Trouble()),
            demo.DemoRun("demo-ada", M1, IQ2, 0, demo.Trouble(failing_variant="01+02")),
            demo.DemoRun("demo-chen", M1, IQ3, 0, demo.Trouble(degenerate_variant="01")),
        ],
    )
