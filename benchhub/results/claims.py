"""Claims about one model file (docs/protocol.md section 7, model identity).

Each submission claims facts about the file it measured (ModelFile.FACTS, by `facts_digest`). A
claim has standing only from established machines: keys past probation, not banned, with no hidden
or quarantined row for the file, counted once per network (the /24 or /64 each key registered
from). The claim that stands is the moderator's pin, else the one with the most established
networks; a tie goes to the claim that had standing first, so a newcomer must outweigh the
incumbent, not match it. Submissions whose facts differ from the claim that stands are held; with
no claim standing, every claim of a disputed file waits, held. A conflict holds submissions, never
the established ones and never a whole group.

Every group refresh of a disputed file computes the standing itself (read only) to hold its own
submissions. `settle` compares it with the last recorded one, outside any upload's transaction,
and says when it changed, so that the caller queues the file's groups once (tasks.settle_file_claims).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import CharField, Count, Min, Value
from django.db.models.functions import Cast, Coalesce, Concat, NullIf
from django.utils import timezone

from benchhub.results.flags import QUARANTINED
from benchhub.results.models import FileStanding, ModelClaimDecision, ModelFile, Submission
from benchhub.rows import get_or_insert


@dataclass
class Claim:
    """One set of facts about the file and who stands behind it."""

    digest: str
    keys: set[int] = field(default_factory=set)  # every key whose standing submissions make it
    networks: set[str] = field(default_factory=set)  # the established ones, once per network
    since: datetime | None = None  # when it first had an established machine behind it
    submissions: int = 0

    @property
    def weight(self) -> int:
        return len(self.networks)


@dataclass(frozen=True)
class Standing:
    sha256: str
    claims: dict[str, Claim]
    established: str | None  # the facts_digest of the claim that stands
    pinned: bool

    @property
    def disputed(self) -> bool:
        return len(self.claims) > 1

    def holds(self, digest: str) -> bool:
        """Whether a submission with these facts is held by the file's conflict."""
        return self.disputed and digest != self.established


def in_dispute(sha256: str) -> bool:
    """Whether claims with different facts were ever made about the file: one small query on its
    claims (not its submissions), the only cost a never-disputed file pays."""
    return ModelFile.objects.filter(sha256=sha256).values("facts_digest").distinct().order_by()[:2].count() > 1


def network_of(key_id: int, registered_network: str) -> str:
    """Keys older than the network rule have none recorded: each counts as a network of its own."""
    return registered_network or f"key:{key_id}"


def standing(sha256: str, now: datetime | None = None) -> Standing:
    """The file's claims with their weights, and the one that stands (a moderator's pin first)."""
    now = now or timezone.now()
    probation = timedelta(seconds=settings.BENCHHUB_KEY_PROBATION_S)
    rows = list(
        Submission.objects.filter(model_sha256=sha256)
        .order_by()
        .values_list(
            "key_id",
            "key__created_at",
            "key__registered_network",
            "key__banned",
            "hidden",
            "withdrawn_at",
            "released",
            "flags",
            "received_at",
            "model_file__facts_digest",
        )
    )
    # A key with a hidden or quarantined row for this file (withdrawn or not) speaks for it no more.
    disqualified = {
        key
        for key, _, _, banned, hidden, _, released, flags, _, _ in rows
        if banned or hidden or (QUARANTINED in flags and not released)
    }
    claims: dict[str, Claim] = {}
    for key, created, network, _, _, withdrawn, _, _, received, digest in rows:
        if withdrawn is not None:
            continue
        claim = claims.setdefault(digest, Claim(digest))
        claim.keys.add(key)
        claim.submissions += 1
        if key in disqualified or (probation and created > now - probation):
            continue
        claim.networks.add(network_of(key, network))
        established_at = max(created + probation, received)
        claim.since = established_at if claim.since is None else min(claim.since, established_at)
    decision = ModelClaimDecision.objects.filter(sha256=sha256).values_list("claim__facts_digest", flat=True).first()
    if decision is not None:
        return Standing(sha256, claims, decision, pinned=True)
    return Standing(sha256, claims, _strongest(claims), pinned=False)


def _strongest(claims: dict[str, Claim]) -> str | None:
    """The claim with the most established networks; a tie goes to the one that had standing first."""
    weighed = [claim for claim in claims.values() if claim.weight > 0 and claim.since is not None]
    if not weighed:
        return None
    best = min(weighed, key=lambda claim: (-claim.weight, claim.since, claim.digest))
    return best.digest


def held_in(submissions: Any, found: Standing) -> set[Any]:
    """The pks among `submissions` (a queryset) whose claim the file's standing holds."""
    if not found.disputed:
        return set()
    return {pk for pk, digest in submissions.values_list("pk", "model_file__facts_digest") if found.holds(digest)}


def settle(sha256: str, changed: bool = False) -> bool:
    """Record the file's standing; True when it changed, and then its `updated_at` says which
    groups were refreshed before it (tasks.queue_file_groups). Runs after the upload's transaction
    has committed, in a short one of its own on one row. `changed`: a moderator's pin changed
    what the file's pages show, whatever the standing."""
    found = standing(sha256)
    wanted = {"established": found.established or "", "disputed": found.disputed}
    with transaction.atomic():
        known = FileStanding.objects.filter(sha256=sha256).exists()
        row = get_or_insert(FileStanding, {"sha256": sha256}, wanted)
        row = FileStanding.objects.select_for_update().get(pk=row.pk)
        if not known:
            return True
        if not changed and {"established": row.established, "disputed": row.disputed} == wanted:
            return False
        FileStanding.objects.filter(pk=row.pk).update(**wanted, updated_at=timezone.now())
    return True


def disputed_files() -> list[str]:
    """Every file with claims whose facts differ (few: a re-quantised file has another sha256)."""
    return list(
        ModelFile.objects.values("sha256")
        .annotate(facts=Count("facts_digest", distinct=True))
        .filter(facts__gt=1)
        .order_by("sha256")
        .values_list("sha256", flat=True)
    )


def display_name(sha256: str, found: Standing | None) -> tuple[str, str] | None:
    """(name, quant) of the file as every page shows it, where a rule decides: a moderator's pinned
    name, else the claim that stands, named by the label (or file name) most established networks
    sent with it. None: the file is undisputed and all its claims share one name (the cells' own)."""
    decision = ModelClaimDecision.objects.filter(sha256=sha256).select_related("claim").first()
    if decision is not None and decision.name:
        return decision.name, decision.claim.file_type
    names = ModelFile.objects.filter(sha256=sha256).order_by()
    if found is None and names.values("label", "file_name").distinct()[:2].count() < 2:
        return None
    digest = found.established if found is not None else None
    probation = timedelta(seconds=settings.BENCHHUB_KEY_PROBATION_S)
    rows = Submission.objects.filter(model_sha256=sha256, withdrawn_at__isnull=True, hidden=False, key__banned=False)
    if digest is not None:
        rows = rows.filter(model_file__facts_digest=digest)
    if probation:
        rows = rows.filter(key__created_at__lte=timezone.now() - probation)
    # One vote per network (as standing counts them), tallied in the database: a popular file has
    # thousands of submissions, and every refresh of each of its groups asks.
    network = Coalesce(NullIf("key__registered_network", Value("")), Concat(Value("key:"), Cast("key_id", CharField())))
    shown = Coalesce(NullIf("model_file__label", Value("")), "model_file__file_name")
    tally = (
        rows.annotate(shown=shown)
        .values("shown", "model_file__file_type")
        .annotate(networks=Count(network, distinct=True), first=Min("received_at"))
        .order_by("-networks", "first", "shown")
        .first()
    )
    return None if tally is None else (tally["shown"], tally["model_file__file_type"])


def shown_names() -> list[tuple[str, str, str]]:
    """(sha256, name, quant) of every file whose pages a rule names (display_name is not None): the
    pinned, the disputed and those sent under several names. The snapshot publishes them, as it
    publishes holds: the networks that decide them are not public."""
    several = (
        ModelFile.objects.values("sha256")
        .annotate(names=Count(Coalesce(NullIf("label", Value("")), "file_name"), distinct=True))
        .filter(names__gt=1)
        .values_list("sha256", flat=True)
    )
    candidates = set(several) | set(disputed_files()) | set(ModelClaimDecision.objects.values_list("sha256", flat=True))
    found = []
    for sha256 in sorted(candidates):
        name = display_name(sha256, standing(sha256) if in_dispute(sha256) else None)
        if name is not None:
            found.append((sha256, *name))
    return found
