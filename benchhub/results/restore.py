"""A service rebuilt from its own public snapshot (`manage.py restore_snapshot FILE`; docs/reliability.md).

Into an empty database: the campaigns' versions, the contributors and their keys (with their
registration times, so probation reads as it did), every submission from its stored envelope,
checked again as at ingest and stored under its own id and time, then what the payloads cannot
show: withdrawals (with their signed envelopes), hidden rows, quarantined rows a moderator had
released, for each file whose claims conflicted, a pin of the claim that stood, and for each file a
rule names (the snapshot's model_name records), a pin carrying that name. Then every
cell is recomputed. What the snapshot does not carry (admin accounts, secrets, key networks,
bans, demo marks, throttle counters) is listed in docs/reliability.md.
"""

from __future__ import annotations

import gzip
import hashlib
import json
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchhub_protocol.envelope import EnvelopeError, b64decode
from django.db import IntegrityError, transaction
from django.utils.dateparse import parse_datetime

from benchhub.accounts.models import Contributor, PublicKey
from benchhub.results import cells, ingest, versions
from benchhub.results.measurements import rebuild_measurements
from benchhub.results.models import Campaign, CampaignVersion, ModelClaimDecision, ModelFile, Submission

RESTORED = "restored from the public snapshot"


class RestoreError(Exception):
    """A snapshot that cannot be restored, or a database that is not empty; one sentence."""


@dataclass
class Restored:
    contributors: int = 0
    keys: int = 0
    submissions: int = 0
    withdrawn: int = 0
    hidden: int = 0
    released: int = 0
    pinned: int = 0
    cells: int = 0
    model_held: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))


def lines(path: Path) -> Iterator[dict[str, Any]]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            try:
                record = json.loads(line)
            except json.JSONDecodeError as error:
                raise RestoreError(f"line {number} of {path.name} is not JSON ({error.msg}).") from None
            if not isinstance(record, dict) or "kind" not in record:
                raise RestoreError(f"line {number} of {path.name} is not a snapshot record.")
            yield record


def _time(text: Any, what: str) -> Any:
    found = parse_datetime(text) if isinstance(text, str) else None
    if found is None:
        raise RestoreError(f"{what}: {text!r} is not a date and time.")
    return found


def _require_empty() -> None:
    if Submission.objects.exists() or Contributor.objects.exists():
        raise RestoreError("the database already holds contributors or submissions: restore into an empty one.")


def _campaign(record: dict[str, Any]) -> None:
    """The snapshot's versions of one campaign, each verified against the bundled campaign keys as
    when it was published; the bundled definitions were synced first."""
    slug = record["manifest"]["slug"]
    campaign = Campaign.objects.filter(slug=slug).first()
    for found in record.get("versions") or []:
        if CampaignVersion.objects.filter(digest=found["digest"]).exists():
            continue
        if campaign is None or found.get("signature") is None:
            raise RestoreError(f"campaign {slug} version {found['version']} is unknown here and not signed.")
        versions.publish({**found["manifest"], "signature": found["signature"]})
    for found in record.get("versions") or []:
        # Its publication time as well: a submission without a campaign_digest is judged by the
        # version open at its created_at, and one published here now would be open at none of them.
        published = found.get("published_at")
        when = {"published_at": _time(published, f"campaign {slug} version {found['version']}")} if published else {}
        CampaignVersion.objects.filter(digest=found["digest"]).update(state=found["state"], **when)


def _contributor(record: dict[str, Any], restored: Restored) -> None:
    contributor = Contributor.objects.create(handle=record["handle"])
    restored.contributors += 1
    for key in record["keys"]:
        try:
            raw = b64decode(key["public_key"], "public_key")
        except EnvelopeError as error:
            raise RestoreError(f"key {key.get('keyid')}: {error.detail}") from None
        if hashlib.sha256(raw).hexdigest() != key["keyid"]:
            raise RestoreError(f"key {key['keyid']} is not the keyid of its public key.")
        row = PublicKey.objects.create(keyid=key["keyid"], public_key=raw, contributor=contributor)
        PublicKey.objects.filter(pk=row.pk).update(created_at=_time(key["registered_at"], f"key {key['keyid']}"))
        restored.keys += 1


def _submission(record: dict[str, Any], restored: Restored) -> None:
    where = f"submission {record.get('id')}"
    try:
        submission = ingest.restore_submission(
            record["envelope"].encode(), record["id"], _time(record["received_at"], where)
        )
    except ingest.IngestError as error:
        raise RestoreError(f"{where} does not ingest again: {error.detail}") from None
    restored.submissions += 1
    changes: dict[str, Any] = {}
    if record.get("withdrawn_at"):
        changes["withdrawn_at"] = _time(record["withdrawn_at"], where)
        changes["withdrawal"] = (record.get("withdrawal") or "").encode()
        restored.withdrawn += 1
    if record["state"] == "hidden":
        # The published reason of a hidden row withdrawn afterwards holds the moderator's behind a prefix.
        reason = (record.get("reason") or RESTORED).removeprefix(Submission.WITHDRAWN_AFTER_HIDING)
        changes["hidden"], changes["moderation_reason"] = True, reason
        restored.hidden += 1
    held = set(record.get("held") or ())
    if Submission.HELD_FLAGS & set(submission.flags) and not Submission.HELD_FLAGS & held:
        changes["released"] = True  # quarantined by the server, let in by a moderator
        restored.released += 1
    if "model_conflict" in held:
        restored.model_held[submission.model_sha256].add(str(submission.pk))
    if changes:
        Submission.objects.filter(pk=submission.pk).update(**changes)
        rebuild_measurements(Submission.objects.get(pk=submission.pk))  # rows carry the state as at ingest


def _pin_standing_claims(restored: Restored) -> None:
    """The snapshot says which submissions a file's conflict held, not the networks that decided
    it: the claim its other submissions made is pinned, so that the restored pages hold the same
    ones (a moderator may unpin it; docs/reliability.md)."""
    for sha256, held in restored.model_held.items():
        standing = (
            Submission.objects.filter(model_sha256=sha256, withdrawn_at__isnull=True, hidden=False)
            .exclude(pk__in=held)
            .order_by("received_at")
            .select_related("model_file")
        )
        claims = {submission.model_file.facts_digest: submission.model_file for submission in standing}
        if len(claims) == 1:
            claim = next(iter(claims.values()))
            ModelClaimDecision.objects.create(sha256=sha256, claim=claim, decided_by="system", reason=RESTORED)
            restored.pinned += 1


def _pin_shown_names(names: list[dict[str, Any]], restored: Restored) -> None:
    """A file whose pages a rule names (a pin, a dispute, several names sent: the snapshot's model_name
    records) keeps that name: its pin, or one pinned here on the claim of that quant, carries it."""
    for record in names:
        sha256, name, quant = record["sha256"], record["name"], record["quant"]
        decision = ModelClaimDecision.objects.filter(sha256=sha256).first()
        if decision is not None:
            ModelClaimDecision.objects.filter(pk=decision.pk).update(name=name)
            continue
        claim = ModelFile.objects.filter(sha256=sha256, file_type=quant).order_by("pk").first()
        if claim is None:
            raise RestoreError(f"model_name {sha256[:16]}...: no submission claims that file as {quant}.")
        ModelClaimDecision.objects.create(sha256=sha256, claim=claim, name=name, decided_by="system", reason=RESTORED)
        restored.pinned += 1


@contextmanager
def _fields_of(where: str) -> Iterator[None]:
    """A record that lacks a field, or holds one of the wrong shape (a hand-edited snapshot), is one
    sentence naming it, not a traceback; the restore's transaction leaves nothing behind."""
    try:
        yield
    except KeyError as missing:
        raise RestoreError(f"{where} lacks the field {missing}.") from None
    except (TypeError, AttributeError, ValueError) as error:
        raise RestoreError(f"{where} holds a field of the wrong type ({error}).") from None
    except IntegrityError:
        raise RestoreError(f"{where} repeats a record restored before it.") from None


def restore(path: Path) -> Restored:
    """Rebuild the state `path` (a published snapshot, gzipped JSON lines) describes; all or nothing."""
    restored = Restored()
    with transaction.atomic():
        _require_empty()
        versions.sync(Campaign, CampaignVersion)
        records = lines(path)
        header = next(records, None)
        if header is None or header.get("kind") != "snapshot":
            raise RestoreError(f"{path.name} does not start with a snapshot header.")
        names: list[dict[str, Any]] = []
        for number, record in enumerate(records, start=2):
            with _fields_of(f"line {number} of {path.name} ({record['kind']} record)"):
                kind = record["kind"]
                if kind == "campaign":
                    _campaign(record)
                elif kind == "contributor":
                    _contributor(record, restored)
                elif kind == "model_name":
                    names.append(record)
                elif kind == "submission":
                    _submission(record, restored)
                else:
                    raise RestoreError(f"{path.name} holds a record of unknown kind {kind!r}.")
        _pin_standing_claims(restored)
        with _fields_of(f"a model_name record of {path.name}"):
            _pin_shown_names(names, restored)
    restored.cells = cells.refresh_all_cells()
    return restored
