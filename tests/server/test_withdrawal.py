"""A contributor withdraws their own submission with an envelope signed by the same key: it leaves
every cell, its page and the snapshot say so, the raw envelope stays."""

from __future__ import annotations

import gzip
import json
from typing import Any

import pytest
from benchhub_protocol import envelope
from benchhub_protocol.payloads import signed_withdrawal
from django.test import Client

from benchhub.results import cells
from benchhub.results.models import LeaderboardCell, RawEnvelope, Submission
from tests.conftest import Api, build_payload, persona, publish_snapshot

pytestmark = pytest.mark.django_db


@pytest.fixture
def submitted(api: Api, ada: envelope.Signer) -> str:
    response = api.submit(build_payload(), ada)
    assert response.status_code == 201
    cells.refresh_submission_cells(response.json()["id"])
    return str(response.json()["id"])


def withdraw(api: Api, submission_id: str, signer: envelope.Signer) -> Any:
    return api.post(f"/api/v1/submissions/{submission_id}/withdraw", signed_withdrawal(submission_id, signer))


def test_it_withdraws_a_submission_from_every_cell_and_keeps_its_envelope(
    api: Api, ada: envelope.Signer, submitted: str, client: Client
) -> None:
    assert LeaderboardCell.objects.filter(n_machines=1).count() == 4
    response = withdraw(api, submitted, ada)
    assert response.status_code == 200, response.json()
    assert (response.json()["id"], response.json()["status"]) == (submitted, "withdrawn")
    cells.refresh_submission_cells(submitted)
    assert not LeaderboardCell.objects.filter(n_machines__gt=0).exists(), "a withdrawn submission counts in no cell"
    assert {cell.excluded["withdrawn"] for cell in LeaderboardCell.objects.all()} == {1}
    assert RawEnvelope.objects.filter(submission_id=submitted).exists()
    again = withdraw(api, submitted, ada)
    assert (again.status_code, again.json()["withdrawn_at"]) == (200, response.json()["withdrawn_at"])

    page = client.get(f"/submissions/{submitted}/").content.decode()
    assert "Withdrawn by its contributor" in page
    assert client.get(f"/api/v1/submissions/{submitted}/").json()["state"] == "withdrawn"
    publish_snapshot()
    lines = [
        json.loads(line)
        for line in gzip.decompress(b"".join(client.get("/api/v1/snapshot/").streaming_content)).splitlines()
    ]
    [line] = [line for line in lines if line["kind"] == "submission"]
    assert (line["state"], line["withdrawn_at"] is not None) == ("withdrawn", True)
    assert json.loads(line["withdrawal"])["payloadType"] == envelope.WITHDRAWAL_TYPE


def test_it_refuses_another_keys_withdrawal_with_403(api: Api, submitted: str) -> None:
    assert api.register(persona("bob"), "bob").status_code == 201
    response = withdraw(api, submitted, persona("bob"))
    assert (response.status_code, response.json()["error"]) == (403, "not_your_submission")
    assert Submission.objects.get(pk=submitted).withdrawn_at is None


def test_it_refuses_a_withdrawal_naming_another_submission_or_none(
    api: Api, ada: envelope.Signer, submitted: str
) -> None:
    other = "01234567-89ab-7def-8123-456789abcdef"
    body = signed_withdrawal(other, ada)
    response = api.post(f"/api/v1/submissions/{submitted}/withdraw", body)
    assert (response.status_code, response.json()["field"]) == (400, "submission")
    assert withdraw(api, other, ada).status_code == 404
    assert api.post(f"/api/v1/submissions/{submitted}/withdraw", b"{}").status_code == 400
