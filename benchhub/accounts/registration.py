"""docs/protocol.md section 3: registering a key with proof of possession, and linking a second key to a
handle (an envelope signed by the new key and by a key already on the handle)."""

from __future__ import annotations

from dataclasses import dataclass

from benchhub_protocol import envelope, schema
from django.db import IntegrityError, transaction

from benchhub.accounts.errors import IngestError
from benchhub.accounts.models import Contributor, PublicKey
from benchhub.accounts.names import check_handle, handle_key


@dataclass(frozen=True)
class Registration:
    http_status: int  # 201 created or linked, 200 the same key and handle again
    handle: str
    keyid: str

    def body(self) -> dict[str, str]:
        return {"handle": self.handle, "keyid": self.keyid}


def _open(body: bytes) -> tuple[envelope.OpenedEnvelope, dict[str, object], bytes]:
    try:
        opened = envelope.open_envelope(envelope.strict_loads(body), envelope.REGISTRATION_TYPE)
        # The key to verify with travels inside the payload, so this payload is parsed (strictly,
        # canonically) first; nothing is acted on until the signature below has verified.
        payload = envelope.parse_canonical_payload(opened.payload)
        schema.validate_registration(payload)
        public_key = envelope.b64decode(payload["public_key"], "public_key")
    except envelope.EnvelopeError as error:
        raise IngestError.from_envelope(error) from None
    except schema.SchemaViolation as error:
        raise IngestError.from_schema(error) from None
    if not envelope.is_strong_public_key(public_key):
        raise IngestError(400, "weak_key", "public_key is not a valid Ed25519 point or has small order.", "public_key")
    keyid = envelope.keyid_of(public_key)
    if keyid not in opened.keyids:
        raise IngestError(400, "keyid_mismatch", "No signature carries the keyid of public_key.", "signatures")
    if not envelope.verify_signature(opened, keyid, public_key):
        raise IngestError(401, "bad_signature", "The new key's signature does not verify.", "signatures")
    return opened, payload, public_key


def _voucher(opened: envelope.OpenedEnvelope, contributor: Contributor, new_keyid: str) -> PublicKey | None:
    """A key already on the handle whose signature on this envelope verifies."""
    for keyid in opened.keyids:
        if keyid == new_keyid:
            continue
        existing = PublicKey.objects.usable().filter(keyid=keyid, contributor=contributor).first()
        if existing and envelope.verify_signature(opened, keyid, bytes(existing.public_key)):
            return existing
    return None


def register(body: bytes, network: str = "") -> Registration:
    """`network`: the client's network (throttling.network_of), kept on a new key so that a
    moderator can retire every key registered from it."""
    opened, payload, public_key = _open(body)
    keyid = envelope.keyid_of(public_key)
    handle = str(payload["handle"])
    check_handle(handle)
    try:
        with transaction.atomic():
            return _register(opened, handle, keyid, public_key, network)
    except IntegrityError:
        # A concurrent registration won the race for this handle or key; answer as if it came first.
        with transaction.atomic():
            return _register(opened, handle, keyid, public_key, network)


def _holder(handle: str) -> Contributor | None:
    """The contributor whose handle reads as this one (or, for rows older than the rule, equals
    it but for case)."""
    return (
        Contributor.objects.filter(handle_key=handle_key(handle)).first()
        or Contributor.objects.filter(handle__iexact=handle).first()
    )


def _register(
    opened: envelope.OpenedEnvelope, handle: str, keyid: str, public_key: bytes, network: str
) -> Registration:
    known = PublicKey.objects.select_related("contributor").filter(keyid=keyid).first()
    if known is not None:
        if handle_key(known.contributor.handle) != handle_key(handle):
            raise IngestError(409, "key_taken", "This key is already registered to another handle.", "public_key")
        return Registration(200, known.contributor.handle, keyid)
    contributor = _holder(handle)
    if contributor is None:
        contributor = Contributor.objects.create(handle=handle, handle_key=handle_key(handle))
        PublicKey.objects.create(
            keyid=keyid, public_key=public_key, contributor=contributor, registered_network=network
        )
        return Registration(201, contributor.handle, keyid)
    if _voucher(opened, contributor, keyid) is None:
        raise IngestError(
            409,
            "handle_taken",
            f"The handle {contributor.handle!r} (which {handle!r} reads as) belongs to other keys; to add a key, "
            "also sign with a key already on the handle.",
            "handle",
        )
    PublicKey.objects.create(keyid=keyid, public_key=public_key, contributor=contributor, registered_network=network)
    return Registration(201, contributor.handle, keyid)
