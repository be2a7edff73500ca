"""Issue 30: a moderator retires a key, a handle, or a network's keys registered in a time window,
in one audited action (the admin's actions and `manage.py retire_keys`)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.core.management import CommandError, call_command
from django.test import Client
from django.utils import timezone

from benchhub.accounts.models import ModerationEvent, PublicKey
from benchhub.results.models import Submission
from tests.conftest import Api, build_payload, persona

pytestmark = pytest.mark.django_db


@pytest.fixture
def two_keys(api: Api, campaign: object) -> list[str]:
    ids = []
    for name in ("ada", "bob"):
        assert api.register(persona(name), name).status_code == 201
        response = api.submit(build_payload(), persona(name))
        assert response.status_code == 201
        ids.append(response.json()["id"])
    return ids


def test_the_admin_retires_a_handle_with_an_audit_row_per_key_and_hides_its_submissions(
    admin_client: Client, two_keys: list[str]
) -> None:
    ada = PublicKey.objects.get(contributor__handle="ada")
    response = admin_client.post(
        "/admin/accounts/contributor/", {"action": "retire", "_selected_action": [ada.contributor_id]}
    )
    assert response.status_code == 302
    assert PublicKey.objects.get(pk=ada.pk).banned and not PublicKey.objects.get(contributor__handle="bob").banned
    assert list(Submission.objects.filter(hidden=True).values_list("pk", flat=True)) == [
        Submission.objects.get(pk=two_keys[0]).pk
    ]
    assert ModerationEvent.objects.filter(action="retire_key", target=ada.keyid, actor_name="admin").count() == 1
    assert Submission.objects.get(pk=two_keys[0]).cells_refreshed_at is None  # its group waits for its refresh


def test_the_command_retires_the_keys_of_one_network_in_a_window_only(two_keys: list[str]) -> None:
    User.objects.create_user("mod")
    PublicKey.objects.filter(contributor__handle="ada").update(registered_network="203.0.113.0/24")
    PublicKey.objects.filter(contributor__handle="bob").update(registered_network="198.51.100.0/24")
    now = timezone.now()
    window = {
        "since": (now - timedelta(hours=1)).strftime("%Y-%m-%dT%H:%MZ"),
        "until": (now + timedelta(hours=1)).strftime("%Y-%m-%dT%H:%MZ"),
    }
    call_command("retire_keys", network="203.0.113.0/16", reason="burst", actor="mod", dry_run=True, **window)
    assert not PublicKey.objects.filter(banned=True).exists()  # a dry run changes nothing
    call_command("retire_keys", network="203.0.0.0/16", reason="burst", actor="mod", **window)
    assert list(PublicKey.objects.filter(banned=True).values_list("contributor__handle", flat=True)) == ["ada"]
    with pytest.raises(CommandError, match="not a network"):
        call_command("retire_keys", network="not-a-net", reason="x", actor="mod", **window)
    with pytest.raises(CommandError, match="No key matches"):
        earlier = {"since": "2020-01-01T00:00Z", "until": "2020-01-02T00:00Z"}
        call_command("retire_keys", network="198.51.100.0/24", reason="x", actor="mod", **earlier)
