"""Moderator actions, each written to the audit trail in the same transaction as its effect."""

from __future__ import annotations

from collections.abc import Iterable

from django.contrib.auth.models import AnonymousUser, User
from django.db import transaction

from benchhub.accounts.models import ModerationEvent, PublicKey
from benchhub.results.cells import Group, forget_order_state
from benchhub.results.measurements import rebuild_measurements
from benchhub.results.models import Submission
from benchhub.results.tasks import queue_refresh

Actor = User | AnonymousUser


def _audit(actor: Actor, action: str, target: str, reason: str) -> None:
    ModerationEvent.objects.create(
        actor=actor if actor.is_authenticated else None,
        actor_name=actor.get_username() if actor.is_authenticated else "system",
        action=action,
        target=target,
        reason=reason,
    )


def set_hidden(submissions: Iterable[Submission], hidden: bool, actor: Actor, reason: str = "") -> int:
    """Hide (or restore) submissions: their measurements leave (or rejoin) the cells."""
    action = ModerationEvent.Action.HIDE_SUBMISSION if hidden else ModerationEvent.Action.UNHIDE_SUBMISSION
    changed = 0
    for submission in submissions:
        if submission.hidden == hidden:
            continue
        with transaction.atomic():
            group = Group.of(submission)
            forget_order_state(group)  # its rows leave or rejoin the cells: not an incremental change
            submission.hidden = hidden
            submission.cells_refreshed_at = None
            submission.save(update_fields=["hidden", "cells_refreshed_at"])
            rebuild_measurements(submission)
            _audit(actor, action, str(submission.id), reason)
            transaction.on_commit(lambda group=group: queue_refresh(group))  # type: ignore[misc]
        changed += 1
    return changed


def set_banned(keys: Iterable[PublicKey], banned: bool, actor: Actor, reason: str = "") -> int:
    """Ban (or unban) keys: later submissions signed by a banned key are refused with 403."""
    action = ModerationEvent.Action.BAN_KEY if banned else ModerationEvent.Action.UNBAN_KEY
    changed = 0
    for key in keys:
        if key.banned == banned:
            continue
        with transaction.atomic():
            key.banned = banned
            key.save(update_fields=["banned"])
            _audit(actor, action, key.keyid, reason)
        changed += 1
    return changed
