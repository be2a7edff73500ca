"""The one cross-model flow (docs/protocol.md section 4): verify the exact bytes, then parse, validate,
check against the campaign, and store the raw envelope with every normalised row in one
transaction; the cell refresh is queued only once that transaction has committed."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any

from benchhub_protocol import envelope, model_facts, rounds, schema
from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Q
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from benchhub.accounts import names
from benchhub.accounts.errors import IngestError
from benchhub.accounts.models import PublicKey
from benchhub.accounts.registration import Registration, register
from benchhub.results import board, campaigns, cells, copies, flags, moderation, storage, tasks, versions
from benchhub.results.campaigns import campaign_rules
from benchhub.results.measurements import measurement_rows
from benchhub.results.models import (
    Campaign,
    CampaignVersion,
    Machine,
    Measurement,
    ModelFile,
    RawEnvelope,
    Submission,
)

__all__ = ["IngestError", "IngestResult", "Registration", "VerifiedEnvelope", "ingest_submission", "register"]


@dataclass(frozen=True)
class VerifiedEnvelope:
    """An envelope whose single signature verified under a registered, unbanned key."""

    body: bytes
    opened: envelope.OpenedEnvelope
    key: PublicKey


@dataclass(frozen=True)
class IngestResult:
    id: str
    status: str
    created: bool  # False when the identical envelope had been stored before (a safe retry)
    counts_from: datetime | None = None  # when its key leaves probation; None: it counts at once

    @property
    def http_status(self) -> int:
        return 201 if self.created else 200


def verify(body: bytes) -> VerifiedEnvelope:
    """Everything that can be decided before the payload bytes are parsed."""
    try:
        opened = envelope.open_envelope(envelope.strict_loads(body), envelope.SUBMISSION_TYPE)
    except envelope.EnvelopeError as error:
        raise IngestError.from_envelope(error) from None
    if len(opened.signatures) != 1:
        raise IngestError(400, "bad_envelope", "A submission carries exactly one signature.", "signatures")
    keyid = opened.keyids[0]
    key = PublicKey.objects.select_related("contributor").filter(keyid=keyid).first()
    if key is None:
        raise IngestError(401, "unknown_key", "No registered key has this keyid.", "signatures[0].keyid")
    if key.banned:
        raise IngestError(403, "key_banned", "This key has been banned by a moderator.", "signatures[0].keyid")
    if not envelope.verify_signature(opened, keyid, bytes(key.public_key)):
        raise IngestError(401, "bad_signature", "The signature does not verify over the payload.", "signatures[0].sig")
    return VerifiedEnvelope(body, opened, key)


def counts_from(key: PublicKey) -> datetime | None:
    """When the key's results enter the cells (docs/protocol.md, probation); None: already."""
    end = key.created_at + timedelta(seconds=settings.BENCHHUB_KEY_PROBATION_S)
    return end if end > timezone.now() else None


def ingest_submission(body: bytes, before_parse: Callable[[VerifiedEnvelope], None] | None = None) -> IngestResult:
    """`before_parse` runs once the signer is known (the API throttles per key there)."""
    verified = verify(body)
    if before_parse is not None:
        before_parse(verified)
    return replace(_store_verified(verified), counts_from=counts_from(verified.key))


def _store_verified(verified: VerifiedEnvelope) -> IngestResult:
    try:
        payload = envelope.parse_canonical_payload(verified.opened.payload)
        schema.validate_submission(payload)  # refuses NUL too, which PostgreSQL text cannot hold (a control character)
        _refuse_contradictions(payload["model"])
    except envelope.EnvelopeError as error:
        raise IngestError.from_envelope(error) from None
    except schema.SchemaViolation as error:
        raise IngestError.from_schema(error) from None
    payload_sha256 = hashlib.sha256(verified.opened.payload).hexdigest()
    measured = copies.measured(payload)
    previous = _previous(verified.key, payload["nonce"], payload_sha256, measured.sha256)
    if previous is not None:
        return previous
    _refuse_near_copy(measured)
    campaign, version = check_against_campaign(payload)
    check_rounds(payload)
    check_created_at(payload, campaign)
    try:
        with transaction.atomic():
            submission = _store(verified, payload, payload_sha256, campaign, version, measured=measured)
    except IntegrityError:
        # Another request stored this (key, nonce), these payload bytes or this sweep between our check and our insert.
        previous = _previous(verified.key, payload["nonce"], payload_sha256, measured.sha256)
        if previous is None:
            raise
        return previous
    return IngestResult(str(submission.id), submission.status, created=True)


def _refuse_contradictions(model: dict[str, Any]) -> None:
    """A model whose facts contradict each other is no claim about any file (docs/protocol.md, model identity)."""
    found = model_facts.contradictions(model)
    if found:
        raise IngestError(400, "model_facts_contradict", found[0].detail, found[0].field)


def _previous(key: PublicKey, nonce: str, payload_sha256: str, measured_sha256: str) -> IngestResult | None:
    """The stored answer to a retry; a refusal when the nonce, the payload bytes or the measured
    rows were used otherwise, under any key. One query for the three unique keys: at most three rows."""
    fields = ("id", "status", "key", "nonce", "payload_sha256", "measured_sha256")
    same = Q(key=key, nonce=nonce) | Q(payload_sha256=payload_sha256) | Q(measured_sha256=measured_sha256)
    found = list(Submission.objects.filter(same).only(*fields).order_by()[:3])
    stored = next((row for row in found if row.key_id == key.pk and row.nonce == nonce), None)
    if stored is None:
        if not found:
            return None
        if any(row.payload_sha256 == payload_sha256 for row in found):
            raise IngestError(
                409, "payload_replayed", "These payload bytes were already submitted under another key.", "payload"
            )
        earlier = found[0]
        raise IngestError(
            409,
            "duplicate_measurement",
            f"These measured rows were already submitted as submission {earlier.id}: one measurement counts once.",
            "sweep.runs",
            submission=str(earlier.id),
        )
    if stored.payload_sha256 != payload_sha256:
        raise IngestError(409, "nonce_reused", "This key already used this nonce for a different payload.", "nonce")
    return IngestResult(str(stored.id), stored.status, created=False)


def _refuse_near_copy(measured: copies.Measured) -> None:
    stored = copies.near_copy(measured)
    if stored is not None:
        raise IngestError(
            409,
            "duplicate_measurement",
            f"These measured rows repeat submission {stored.id} within {copies.TOLERANCE:.1%}: "
            "one measurement counts once.",
            "sweep.runs",
            submission=str(stored.id),
        )


def check_against_campaign(payload: dict[str, Any]) -> tuple[Campaign, CampaignVersion]:
    """A submission's variants must be variants of the campaign version it ran under, baseline first
    (docs/protocol.md section 6 and campaign versions)."""
    campaign = Campaign.objects.filter(slug=payload["campaign"]).first()
    if campaign is None:
        raise IngestError(400, "unknown_campaign", f"No campaign {payload['campaign']!r}.", "campaign")
    version = versions.version_for(campaign, payload, created_at_of(payload["created_at"]))
    repo, baseline = version.manifest["repo"], version.manifest["baseline"]
    if payload["llama_cpp"]["repo"] != repo:
        raise IngestError(400, "wrong_repo", f"Campaign {campaign.slug} measures {repo}.", "llama_cpp.repo")
    manifest = {variant.name: variant for variant in campaigns.resolved_variants(version.manifest)}
    if payload["variants"][0]["name"] != baseline:
        raise IngestError(
            400, "baseline_first", f"The first variant must be the baseline {baseline!r}.", "variants[0].name"
        )
    for index, variant in enumerate(payload["variants"]):
        where = f"variants[{index}]"
        expected = manifest.get(variant["name"])
        if expected is None:
            raise IngestError(
                400, "unknown_variant", f"{variant['name']!r} is not a variant of {campaign.slug}.", where
            )
        if not expected.available:
            raise IngestError(400, "variant_unavailable", expected.unavailable_reason, f"{where}.name")
        if expected.commit and variant["commit"] != expected.commit:
            raise IngestError(400, "wrong_commit", f"Variant {expected.name} is pinned to {expected.commit}.", where)
        sent = [(patch["name"], patch["sha256"]) for patch in variant["patches"]]
        if sent != [(patch.name, patch.sha256) for patch in expected.patches]:
            raise IngestError(
                400, "wrong_patches", f"Patches of {expected.name} differ from the manifest.", f"{where}.patches"
            )
    return campaign, version


def created_at_of(text: str) -> datetime:
    """The payload's created_at as stored (the bench's COPY writer stores it the same way)."""
    try:
        parsed = parse_datetime(text)
    except ValueError:
        parsed = None
    if parsed is None:
        raise IngestError(400, "schema_violation", "created_at: not a real date and time", "created_at")
    return parsed


def check_rounds(payload: dict[str, Any]) -> None:
    found = len({run["rep"] for run in payload["sweep"]["runs"]})
    if found > rounds.MAX_ROUNDS:
        raise IngestError(
            400, "too_many_rounds", f"{found} rounds: at most {rounds.MAX_ROUNDS} are accepted.", "sweep.runs"
        )


def check_created_at(payload: dict[str, Any], campaign: Campaign) -> None:
    """Not in the future (beyond the clock skew allowed), nor before the campaign opened."""
    created = created_at_of(payload["created_at"])
    latest = timezone.now() + timedelta(seconds=settings.BENCHHUB_CLOCK_SKEW_S)
    if created > latest:
        raise IngestError(400, "created_in_future", "created_at lies in the future.", "created_at")
    opened = campaign_rules(campaign.definition).opened_at
    if opened is not None and created < opened:
        raise IngestError(
            400, "created_before_campaign", f"created_at is before {campaign.slug} opened ({opened}).", "created_at"
        )


def submission_row(
    key: PublicKey,
    payload: dict[str, Any],
    payload_sha256: str,
    campaign: Campaign,
    machine: Machine,
    model_file: ModelFile,
    version: CampaignVersion | None = None,
    measured: copies.Measured | None = None,
) -> Submission:
    """The unsaved Submission of a verified, valid payload, judged by the campaign version it ran
    under (the bench's state generator writes many with bulk_create); `measured` as ingest found it."""
    facts = payload["machine"]
    submission_flags = flags.derive(payload, version.manifest if version else campaign.definition)
    measured = measured or copies.measured(payload)
    return Submission(
        campaign=campaign,
        ran_under=version,
        campaign_version=version.measured_from if version else 1,
        contributor=key.contributor,
        key=key,
        machine=machine,
        model_file=model_file,
        chip=facts["chip"],
        gpu_cores=facts["gpu_cores"],
        model_sha256=model_file.sha256,
        backend=facts["backend"],
        quant=model_file.file_type,
        nonce=payload["nonce"],
        payload_sha256=payload_sha256,
        measured_sha256=measured.sha256,
        measured_shape=measured.shape,
        measured_tg_log=measured.tg_log,
        measured_pp_log=measured.pp_log,
        measured_values=measured.values,
        created_at=created_at_of(payload["created_at"]),
        status=Submission.Status.FLAGGED if submission_flags else Submission.Status.ACCEPTED,
        flags=submission_flags,
        is_demo=key.contributor.is_demo,
        agent_name=payload["agent"]["name"],
        agent_version=payload["agent"]["version"],
        power_source=facts["power_source"],
        low_power_mode=facts["low_power_mode"],
        thermal=facts["thermal"],
        llama_cpp=payload["llama_cpp"],
        sweep_settings={name: value for name, value in payload["sweep"].items() if name != "runs"},
    )


def _store(
    verified: VerifiedEnvelope,
    payload: dict[str, Any],
    payload_sha256: str,
    campaign: Campaign,
    version: CampaignVersion,
    *,
    measured: copies.Measured | None = None,
    restored: tuple[str, datetime] | None = None,
) -> Submission:
    """`restored`: the (id, received_at) a snapshot gives a submission rebuilt from it (restore.py);
    its cells are refreshed once every submission is in."""
    names.claim_chip(payload["machine"]["chip"])  # one spelling per chip slug (issue 30)
    model_file, new_claim = storage.model_file_claim(payload["model"])
    machine = storage.machine_row(payload["machine"])
    submission = submission_row(verified.key, payload, payload_sha256, campaign, machine, model_file, version, measured)
    if restored is not None:
        submission.id = restored[0]
    submission.save(force_insert=True)
    if restored is not None:
        Submission.objects.filter(pk=submission.pk).update(received_at=restored[1])
        submission.received_at = restored[1]
    RawEnvelope.objects.create(
        submission=submission, body=verified.body, sha256=hashlib.sha256(verified.body).hexdigest()
    )
    variants = storage.store_rows([(submission, payload)])
    Measurement.objects.bulk_create(measurement_rows(submission, payload, variants[submission.pk]))
    group = board.Group.of(submission)
    cells.ensure_group(group)
    if restored is None:
        transaction.on_commit(lambda: tasks.queue_refresh(group))
        if new_claim:  # a claim seen before changes no standing the sweeper would not settle within a minute
            transaction.on_commit(lambda: tasks.after_claim(model_file.sha256))  # outside this transaction
    return submission


def restore_submission(body: bytes, submission_id: str, received_at: datetime) -> Submission:
    """A submission rebuilt from a public snapshot (restore.py): the stored bytes, checked as at
    ingest (signature, canonical form, schema, model facts, campaign), under its own id and time."""
    verified = verify(body)
    try:
        payload = envelope.parse_canonical_payload(verified.opened.payload)
        schema.validate_submission(payload)
    except envelope.EnvelopeError as error:
        raise IngestError.from_envelope(error) from None
    except schema.SchemaViolation as error:
        raise IngestError.from_schema(error) from None
    _refuse_contradictions(payload["model"])
    campaign, version = check_against_campaign(payload)
    payload_sha256 = hashlib.sha256(verified.opened.payload).hexdigest()
    with transaction.atomic():
        return _store(verified, payload, payload_sha256, campaign, version, restored=(submission_id, received_at))


WITHDRAWAL_KEYS = {"schema_version", "submission", "created_at"}


def withdraw_submission(submission_id: str, body: bytes) -> Submission:
    """A contributor takes back one of their submissions with an envelope signed by the key that
    signed it (docs/api.md). Repeating a withdrawal answers as the first did."""
    try:
        opened = envelope.open_envelope(envelope.strict_loads(body), envelope.WITHDRAWAL_TYPE)
        if len(opened.signatures) != 1:
            raise IngestError(400, "bad_envelope", "A withdrawal carries exactly one signature.", "signatures")
        payload = envelope.parse_canonical_payload(opened.payload)
    except envelope.EnvelopeError as error:
        raise IngestError.from_envelope(error) from None
    if set(payload) != WITHDRAWAL_KEYS or payload["schema_version"] != 1:
        raise IngestError(
            400, "schema_violation", f"A withdrawal payload holds exactly {sorted(WITHDRAWAL_KEYS)}.", "payload"
        )
    if not isinstance(payload["created_at"], str):
        raise IngestError(400, "schema_violation", "created_at: must be an RFC 3339 string.", "created_at")
    created_at_of(payload["created_at"])
    if payload["submission"] != submission_id:
        raise IngestError(400, "wrong_submission", "The payload names another submission than the URL.", "submission")
    submission = Submission.objects.filter(pk=submission_id).select_related("key").first()
    if submission is None:
        raise IngestError(404, "not_found", "No submission has this id.")
    keyid = opened.keyids[0]
    if keyid != submission.key.keyid:
        raise IngestError(
            403, "not_your_submission", "Only the key that signed a submission can withdraw it.", "signatures[0].keyid"
        )
    if not envelope.verify_signature(opened, keyid, bytes(submission.key.public_key)):
        raise IngestError(401, "bad_signature", "The signature does not verify over the payload.", "signatures[0].sig")
    moderation.withdraw(submission, body)
    return submission
