"""Helpers for the web tests: real data through the real path (demo envelopes signed with fixed
keys, the ingest, the cell refresh), never rows written behind the ingest's back."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from benchhub.accounts.models import Contributor
from benchhub.results.ingest import ingest_submission, register
from benchhub.results.models import Campaign, Submission
from benchhub.results.tasks import refresh_cells_for_submission
from benchhub.web import demo


def ingest_runs(campaign: Campaign, runs: Sequence[demo.DemoRun]) -> list[Submission]:
    for handle in {run.handle for run in runs}:
        register(demo.signed_demo_registration(handle))
        Contributor.objects.filter(keys__keyid=demo.signer_for(handle).keyid).update(is_demo=True)
    ids = []
    for run in runs:
        result = ingest_submission(demo.signed_demo_run(campaign, run))
        refresh_cells_for_submission(result.id)
        ids.append(result.id)
    return [Submission.objects.get(pk=pk) for pk in ids]


M1, M5_PRO = demo.CHIPS[0], demo.CHIPS[-1]
IQ2, IQ3 = demo.MODELS[0], demo.MODELS[1]


def page_text(response: Any) -> str:
    assert response.status_code == 200, response.status_code
    return str(response.content.decode())
