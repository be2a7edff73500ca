"""Web fixtures: real data through the real path (demo envelopes signed with fixed keys, the
ingest, the cell refresh), never rows written behind the ingest's back."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from io import StringIO
from typing import Any

import pytest
from django.core.management import call_command

from benchhub.results.campaigns import sync_campaigns
from benchhub.results.ingest import ingest_submission, register
from benchhub.results.models import Campaign, Submission
from benchhub.results.tasks import refresh_cells_for_submission
from benchhub.web import demo


@pytest.fixture
def live_campaign(db: None) -> Campaign:
    """The campaign row the migrations create; synced again because transactional tests flush it."""
    sync_campaigns(Campaign)
    return Campaign.objects.get(slug=demo.CAMPAIGN)


def ingest_runs(campaign: Campaign, runs: Sequence[demo.DemoRun]) -> list[Submission]:
    from benchhub.accounts.models import Contributor

    for handle in {run.handle for run in runs}:
        register(demo.registration_envelope(handle))
        Contributor.objects.filter(keys__keyid=demo.signer_for(handle).keyid).update(is_demo=True)
    ids = []
    for run in runs:
        result = ingest_submission(demo.submission_envelope(campaign, run))
        refresh_cells_for_submission(result.id)
        ids.append(result.id)
    return [Submission.objects.get(pk=pk) for pk in ids]


M1, M5_PRO = demo.CHIPS[0], demo.CHIPS[-1]
IQ2, IQ3 = demo.MODELS[0], demo.MODELS[1]


@pytest.fixture
def ingest(live_campaign: Campaign) -> Callable[[Sequence[demo.DemoRun]], list[Submission]]:
    return lambda runs: ingest_runs(live_campaign, runs)


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


def page_text(response: Any) -> str:
    assert response.status_code == 200, response.status_code
    return str(response.content.decode())
