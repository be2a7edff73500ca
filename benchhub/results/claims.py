"""Claims about one model file (its sha256), made by each submission that measured it: when they
disagree on what the file is, every conflicting claim is held, the first one included, until the
conflict resolves: by a moderator's decision, or by itself when one claim is backed by at least
AUTO_RESOLVE_MACHINES machines and every other claim by at most one."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from benchhub.results.models import ModelClaimDecision, ModelFile, Submission

AUTO_RESOLVE_MACHINES = 3

Identity = tuple[Any, ...]


def identity(claim: ModelFile) -> Identity:
    return tuple(getattr(claim, name) for name in ModelFile.IDENTITY)


def _active(sha256: str) -> list[tuple[Any, int, Identity]]:
    """(submission, key, identity) of every submission that still stands behind its claim."""
    fields = [f"model_file__{name}" for name in ModelFile.IDENTITY]
    rows = (
        Submission.objects.filter(model_sha256=sha256, withdrawn_at__isnull=True, hidden=False)
        .order_by()
        .values_list("pk", "key_id", *fields)
    )
    return [(pk, key, tuple(rest)) for pk, key, *rest in rows]


def winner(sha256: str, machines_by_claim: dict[Identity, set[int]]) -> Identity | None:
    """The claim that stands: the moderator's, else the one backed by enough machines alone."""
    decision = ModelClaimDecision.objects.filter(sha256=sha256).select_related("claim").first()
    if decision is not None:
        return identity(decision.claim)
    strong = [claim for claim, keys in machines_by_claim.items() if len(keys) >= AUTO_RESOLVE_MACHINES]
    if len(strong) == 1 and all(len(keys) <= 1 for claim, keys in machines_by_claim.items() if claim != strong[0]):
        return strong[0]
    return None


def held_submissions(sha256: str) -> set[Any]:
    """The submissions held because their claim about the file conflicts with another."""
    active = _active(sha256)
    machines: dict[Identity, set[int]] = defaultdict(set)
    for _, key, claim in active:
        machines[claim].add(key)
    if len(machines) <= 1:
        return set()
    standing = winner(sha256, machines)
    return {pk for pk, _, claim in active if claim != standing}


def in_dispute(sha256: str) -> bool:
    """Whether the file's claims differ (now or once): then every page of the file is refreshed
    when one of its claims arrives, leaves or is decided on."""
    claims = ModelFile.objects.filter(sha256=sha256).values_list(*ModelFile.IDENTITY).distinct()
    return len(claims[:2]) > 1


def touch(sha256: str) -> bool:
    """Mark every page of a disputed file as waiting, so that its next refresh re-reads the claims
    (the caller queues them; the sweeper covers a lost message). Returns whether it did."""
    if not in_dispute(sha256):
        return False
    Submission.objects.filter(model_sha256=sha256).update(cells_refreshed_at=None)
    return True
