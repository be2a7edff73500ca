"""Changes after ingest, each written to the audit trail in the same transaction as its effect: a
moderator hides or restores a submission, releases one the server held back (quarantined,
model_conflict), bans or retires keys, marks a contributor demo or real, deletes one; a
contributor withdraws a submission. A change to a submission rewrites its measurements from its
stored envelope and queues its group's refresh."""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from datetime import datetime

from django.contrib.auth.models import AnonymousUser, User
from django.db import transaction
from django.utils import timezone

from benchhub.accounts import networks
from benchhub.accounts.errors import IngestError
from benchhub.accounts.models import ChipName, Contributor, ModerationEvent, PublicKey
from benchhub.results.board import Group
from benchhub.results.measurements import rebuild_measurements
from benchhub.results.models import ModelClaimDecision, ModelFile, Submission
from benchhub.results.tasks import after_claim, queue_refresh, settle_claims

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
    transaction.on_commit(lambda: queue_refresh(group))
    transaction.on_commit(lambda: after_claim(submission.model_sha256))  # its claim's standing may change


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
    conflict is decided per file: pin_claim)."""
    action = ModerationEvent.Action.RELEASE_SUBMISSION if released else ModerationEvent.Action.HOLD_SUBMISSION
    held = [submission for submission in submissions if Submission.HELD_FLAGS.intersection(submission.flags)]
    return _decide(held, "released", released, action, actor, reason)


def withdraw(submission: Submission, signed: bytes) -> bool:
    """Its contributor takes it back with the `signed` withdrawal envelope (kept, so anyone can
    check it): it leaves every cell; the raw envelope stays. False when it was withdrawn already."""
    with transaction.atomic():
        locked = Submission.objects.select_for_update().select_related("key").get(pk=submission.pk)
        if locked.key.banned:  # a banned (or retired) key speaks for nobody any more
            raise IngestError(403, "key_banned", "This key has been banned by a moderator.", "signatures[0].keyid")
        if locked.withdrawn_at is not None:
            submission.withdrawn_at = locked.withdrawn_at
            return False
        locked.withdrawn_at = submission.withdrawn_at = timezone.now()
        locked.withdrawal = signed
        _changed(locked, ["withdrawn_at", "withdrawal"])
        _audit(None, ModerationEvent.Action.WITHDRAW_SUBMISSION, str(submission.id), "withdrawn by its contributor")
    return True


def _set_field(
    rows: Iterable[PublicKey] | Iterable[Contributor], field: str, value: bool, action: str, actor: Actor, reason: str
) -> int:
    """Set a moderator's flag on each key or contributor that differs, each with its audit line."""
    changed = 0
    for row in rows:
        if getattr(row, field) == value:
            continue
        with transaction.atomic():
            setattr(row, field, value)
            row.save(update_fields=[field])
            _audit(actor, action, row.keyid if isinstance(row, PublicKey) else row.handle, reason)
        changed += 1
    return changed


def set_banned(keys: Iterable[PublicKey], banned: bool, actor: Actor, reason: str = "") -> int:
    """Ban (or unban) keys: later submissions signed by a banned key are refused with 403."""
    action = ModerationEvent.Action.BAN_KEY if banned else ModerationEvent.Action.UNBAN_KEY
    return _set_field(keys, "banned", banned, action, actor, reason)


@transaction.atomic
def retire_keys(keys: Iterable[PublicKey], actor: Actor, reason: str) -> tuple[int, int]:
    """Ban each key and hide every submission it signed, in one transaction, each with its audit
    line; the cell groups they touched are refreshed once it commits. Returns (keys, submissions)."""
    retired = hid = 0
    for key in keys:
        if not key.banned:
            key.banned = True
            key.save(update_fields=["banned"])
        _audit(actor, ModerationEvent.Action.RETIRE_KEY, key.keyid, reason)
        retired += 1
        hid += set_hidden(Submission.objects.filter(key=key, hidden=False), True, actor, f"key retired: {reason}")
    return retired, hid


def set_demo(contributors: Iterable[Contributor], demo: bool, actor: Actor, reason: str = "") -> int:
    """Mark contributors as demo data ("examples, not measurements" on their pages) or as real."""
    action = ModerationEvent.Action.MARK_DEMO if demo else ModerationEvent.Action.MARK_REAL
    return _set_field(contributors, "is_demo", demo, action, actor, reason)


def delete_contributor(contributor: Contributor, actor: Actor, reason: str = "") -> None:
    """Delete a contributor with the audit line (one with submissions or keys cannot be: the
    database protects them, and the whole change rolls back)."""
    with transaction.atomic():
        _audit(actor, ModerationEvent.Action.DELETE_CONTRIBUTOR, contributor.handle, reason)
        contributor.delete()


def keys_from_network(network: str, since: datetime, until: datetime) -> list[PublicKey]:
    """Keys registered from inside `network` (CIDR: a /24 or /64 as recorded, or any wider one, a
    /16 or a /48) between `since` and `until`."""
    wanted = ipaddress.ip_network(network, strict=False)
    window = PublicKey.objects.filter(created_at__gte=since, created_at__lt=until)
    return list(PublicKey.objects.filter(pk__in=networks.keys_inside(window, wanted)).order_by("created_at"))


def pin_claim(claim: ModelFile, actor: Actor, reason: str = "", name: str = "") -> None:
    """A moderator pins which claim about a model file stands (and, with `name`, what its pages call
    it), whatever the machines behind the others: submissions that agree count, the others are held.
    Every group of the file refreshes once this commits."""
    with transaction.atomic():
        ModelClaimDecision.objects.update_or_create(
            sha256=claim.sha256,
            defaults={
                "claim": claim,
                "name": name,
                "decided_by": actor.get_username() if actor else "system",
                "reason": reason,
            },
        )
        what = f"{claim.file_type}, {claim.size_bytes} bytes" + (f", named {name!r}" if name else "")
        _audit(actor, ModerationEvent.Action.DECIDE_MODEL_CLAIM, claim.sha256, f"{what}: {reason}".strip(": "))
        transaction.on_commit(lambda: settle_claims(claim.sha256, changed=True))


def unpin_claim(sha256: str, actor: Actor, reason: str = "") -> bool:
    """Drop a moderator's pin: the file's standing decides again. False when none was pinned."""
    with transaction.atomic():
        if not ModelClaimDecision.objects.filter(sha256=sha256).delete()[0]:
            return False
        _audit(actor, ModerationEvent.Action.UNPIN_MODEL_CLAIM, sha256, reason)
        transaction.on_commit(lambda: settle_claims(sha256, changed=True))
    return True


def release_chip_names(names: Iterable[ChipName], actor: Actor, reason: str = "") -> int:
    """Free the slugs of spellings that no visible submission uses (a retired squatter's): the next
    submission's spelling claims the slug. A spelling still in use keeps it. Returns how many."""
    released = 0
    for name in names:
        if Submission.objects.filter(chip=name.name, hidden=False, withdrawn_at__isnull=True).exists():
            continue
        with transaction.atomic():
            _audit(actor, ModerationEvent.Action.RELEASE_CHIP_NAME, name.name, reason)
            name.delete()
        released += 1
    return released
