"""Moderation in the Django admin: hide a submission (it leaves the cells), ban a key (its later
submissions get 403), each with an audit trail of who did what."""

from __future__ import annotations

from typing import Any

import pytest
from benchhub_protocol import envelope
from django.test import Client

from benchhub.accounts.models import ModerationEvent, PublicKey
from benchhub.results import board, cells, tasks
from benchhub.results.models import LeaderboardCell, RawEnvelope, Submission
from tests.conftest import Api, build_payload

pytestmark = pytest.mark.django_db


def test_it_hides_a_submission_from_the_admin_and_the_cell_loses_it(
    api: Api,
    ada: envelope.Signer,
    admin_client: Client,
    django_capture_on_commit_callbacks: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    submission_id = api.submit(build_payload(), ada).json()["id"]
    cells.refresh_submission_cells(submission_id)
    assert LeaderboardCell.objects.filter(n_machines=1).count() == 4
    queued: list[tuple[object, ...]] = []
    monkeypatch.setattr(tasks.refresh_group_cells, "delay", lambda *args: queued.append(args))
    with django_capture_on_commit_callbacks(execute=True):
        response = admin_client.post(
            "/admin/results/submission/", {"action": "hide", "_selected_action": [submission_id]}
        )
    assert response.status_code == 302
    group = board.Group.of(Submission.objects.get(pk=submission_id))
    assert queued == [group.task_args()], "hiding queues the refresh of the submission's cells"
    assert tasks.refresh_group_cells(*group.task_args()) == 4
    assert Submission.objects.get(pk=submission_id).hidden
    assert set(LeaderboardCell.objects.values_list("n_machines", flat=True)) == {0}, "hidden rows count in no median"
    assert {cell.excluded["hidden"] for cell in LeaderboardCell.objects.all()} == {1}
    event = ModerationEvent.objects.get()
    assert (event.actor_name, event.action, event.target) == ("admin", "hide_submission", submission_id)
    assert RawEnvelope.objects.filter(submission_id=submission_id).exists(), "hiding never deletes what was received"


def test_it_bans_a_key_from_the_admin_and_refuses_its_later_submissions(
    api: Api, ada: envelope.Signer, admin_client: Client
) -> None:
    earlier = api.submit(build_payload(), ada).json()["id"]
    key = PublicKey.objects.get(keyid=ada.keyid)
    response = admin_client.post("/admin/accounts/publickey/", {"action": "ban", "_selected_action": [key.pk]})
    assert response.status_code == 302
    refused = api.submit(build_payload(), ada)
    assert refused.status_code == 403
    assert refused.json()["error"] == "key_banned"
    assert Submission.objects.filter(pk=earlier).exists()
    event = ModerationEvent.objects.get()
    assert (event.actor_name, event.action, event.target) == ("admin", "ban_key", ada.keyid)


def test_it_keeps_the_audit_trail_read_only_in_the_admin(admin_client: Client) -> None:
    assert admin_client.get("/admin/accounts/moderationevent/add/").status_code == 403


def test_what_the_public_sees_has_no_edit_form_in_the_admin(admin_client: Client) -> None:
    """Issue 30: contributors (demo or real), keys, chip spellings and published rows change only
    through audited actions."""
    for path in (
        "/admin/accounts/contributor/add/",
        "/admin/accounts/publickey/add/",
        "/admin/accounts/chipname/add/",
        "/admin/results/referencerow/add/",
    ):
        assert admin_client.get(path).status_code == 403, path
