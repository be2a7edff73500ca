"""Changes to a submission's state after ingest, each written to the audit trail in the same
transaction as its effect: a moderator hides or restores it, or releases one the server held back
(quarantined); its contributor withdraws it. Each rewrites the submission's
measurements from its stored envelope and queues its group's refresh."""

from __future__ import annotations

from collections.abc import Iterable

from django.contrib.auth.models import AnonymousUser, User
from django.db import transaction
from django.utils import timezone

from benchhub.accounts.models import ModerationEvent, PublicKey
from benchhub.results import claims
from benchhub.results.cells import Group
from benchhub.results.measurements import rebuild_measurements
from benchhub.results.models import ModelClaimDecision, ModelFile, Submission
from benchhub.results.tasks import queue_file_pages, queue_refresh

Actor = User | AnonymousUser


def _audit(actor: Actor | None, action: str, target: str, reason: str) -> None:
    user = actor if isinstance(actor, User) and actor.is_authenticated else None
    ModerationEvent.objects.create(
        actor=user,
        actor_name=user.get_username() if user is not None else "system",
        action=action,
        target=target,
        reason=reason,
    )


def _changed(submission: Submission, fields: list[str]) -> None:
    """Store the new state, rewrite the measurements by it, and queue the group's refresh."""
    submission.cells_refreshed_at = None
    submission.save(update_fields=[*fields, "cells_refreshed_at"])
    rebuild_measurements(submission)
    group = Group.of(submission)
    if claims.touch(submission.model_sha256):  # its claim left or rejoined a disputed file
        transaction.on_commit(lambda: queue_file_pages(submission.model_sha256))
    transaction.on_commit(lambda: queue_refresh(group))


def _decide(submissions: Iterable[Submission], field: str, value: bool, action: str, actor: Actor, reason: str) -> int:
    """Set a moderator's decision on each submission that differs, with its audit line."""
    changed = 0
    for submission in submissions:
        if getattr(submission, field) == value:
            continue
        with transaction.atomic():
            setattr(submission, field, value)
            submission.moderation_reason = reason
            _changed(submission, [field, "moderation_reason"])
            _audit(actor, action, str(submission.id), reason)
        changed += 1
    return changed


def set_hidden(submissions: Iterable[Submission], hidden: bool, actor: Actor, reason: str = "") -> int:
    """Hide (or restore) submissions: their measurements leave (or rejoin) the cells."""
    action = ModerationEvent.Action.HIDE_SUBMISSION if hidden else ModerationEvent.Action.UNHIDE_SUBMISSION
    return _decide(submissions, "hidden", hidden, action, actor, reason)


def set_released(submissions: Iterable[Submission], released: bool, actor: Actor, reason: str = "") -> int:
    """Let submissions quarantined by the server into the cells, or hold them back again (a model
    conflict is decided per file: decide_claim)."""
    action = ModerationEvent.Action.RELEASE_SUBMISSION if released else ModerationEvent.Action.HOLD_SUBMISSION
    held = [submission for submission in submissions if Submission.HELD_FLAGS.intersection(submission.flags)]
    return _decide(held, "released", released, action, actor, reason)


def withdraw(submission: Submission, signed: bytes) -> bool:
    """Its contributor takes it back with the `signed` withdrawal envelope (kept, so anyone can
    check it): it leaves every cell; the raw envelope stays. False when it was withdrawn already."""
    with transaction.atomic():
        locked = Submission.objects.select_for_update().get(pk=submission.pk)
        if locked.withdrawn_at is not None:
            submission.withdrawn_at = locked.withdrawn_at
            return False
        locked.withdrawn_at = submission.withdrawn_at = timezone.now()
        locked.withdrawal = signed
        _changed(locked, ["withdrawn_at", "withdrawal"])
        _audit(None, ModerationEvent.Action.WITHDRAW_SUBMISSION, str(submission.id), "withdrawn by its contributor")
    return True


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


def decide_claim(claim: ModelFile, actor: Actor, reason: str = "") -> None:
    """A moderator says which claim about a model file is true: submissions that agree with it
    count, the others stay held; every page of the file is refreshed."""
    with transaction.atomic():
        ModelClaimDecision.objects.update_or_create(
            sha256=claim.sha256,
            defaults={"claim": claim, "decided_by": actor.get_username() if actor else "system", "reason": reason},
        )
        Submission.objects.filter(model_sha256=claim.sha256).update(cells_refreshed_at=None)
        _audit(actor, ModerationEvent.Action.DECIDE_MODEL_CLAIM, claim.sha256, f"{claim}: {reason}".strip(": "))
        transaction.on_commit(lambda: queue_file_pages(claim.sha256))
