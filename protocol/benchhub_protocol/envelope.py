"""DSSE envelopes over RFC 8785 canonical JSON, signed with Ed25519 (docs/protocol.md sections 1-2).

This module is shared: the agent signs with it and the server verifies with it, so the two can
never disagree about bytes. It does no I/O.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import nacl.bindings
import nacl.exceptions
import nacl.signing
import rfc8785

REGISTRATION_TYPE = "application/vnd.benchhub.registration.v1+json"
SUBMISSION_TYPE = "application/vnd.benchhub.submission.v1+json"
# A contributor takes back one of their own submissions (docs/api.md): signed by the key that signed it.
WITHDRAWAL_TYPE = "application/vnd.benchhub.withdrawal.v1+json"
PAYLOAD_TYPES = (REGISTRATION_TYPE, SUBMISSION_TYPE, WITHDRAWAL_TYPE)

MAX_SAFE_INTEGER = 2**53 - 1
# Deeper than any honest payload (submission nests 5 levels) yet far below Python's recursion limit.
MAX_JSON_DEPTH = 32


class EnvelopeError(ValueError):
    """A message that is not a well-formed, canonical, correctly signed envelope.

    `code` is the machine code the API returns; `field` names the part at fault.
    """

    def __init__(self, code: str, detail: str, field: str | None = None) -> None:
        super().__init__(detail)
        self.code = code
        self.detail = detail
        self.field = field


def b64encode(raw: bytes) -> str:
    return base64.b64encode(raw).decode("ascii")


def b64decode(text: object, field: str) -> bytes:
    """Strict standard base64 (padding required, no other characters)."""
    if not isinstance(text, str):
        raise EnvelopeError("bad_envelope", f"{field} must be a base64 string.", field)
    try:
        raw = base64.b64decode(text.encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError):
        raise EnvelopeError("bad_envelope", f"{field} is not valid standard base64.", field) from None
    # Python ignores set padding bits ("QR==" decodes as "QQ=="): such an envelope is a tampered
    # copy that strict decoders elsewhere refuse, so it must not be stored as if it were the original.
    if base64.b64encode(raw).decode("ascii") != text:
        raise EnvelopeError("bad_envelope", f"{field} is not canonical base64 (padding bits set).", field)
    return raw


def keyid_of(public_key: bytes) -> str:
    return hashlib.sha256(public_key).hexdigest()


def pae(payload_type: str, body: bytes) -> bytes:
    """DSSE v1 pre-authentication encoding."""
    type_bytes = payload_type.encode("utf-8")
    return b"DSSEv1 %d %s %d %s" % (len(type_bytes), type_bytes, len(body), body)


def canonical_bytes(obj: Any) -> bytes:
    """RFC 8785 canonical form; refuses NaN, infinities and integers beyond +-(2^53-1).

    A payload of plain values (ASCII keys; floats non-integral with 1e-4 <= |x| < 1e16, where
    Python's shortest repr and ECMAScript's Number-to-string print the same digits in the same fixed
    notation) serialises identically through json.dumps with sorted keys, ~20x faster than the pure
    Python canonicaliser; anything else takes the canonicaliser."""
    if _check_numbers(obj):
        try:
            return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()
        except UnicodeEncodeError:  # a lone surrogate: the canonicaliser decides
            pass
    try:
        return rfc8785.dumps(obj)
    except (rfc8785.CanonicalizationError, ValueError, TypeError) as exc:
        raise EnvelopeError("not_canonical", f"Payload cannot be canonicalised: {exc}.") from None


def _check_numbers(obj: Any, depth: int = 0) -> bool:
    """Refuse what no canonical form has; return whether the value is plain (see canonical_bytes)."""
    if depth > MAX_JSON_DEPTH:
        raise EnvelopeError("too_deep", f"JSON nests deeper than {MAX_JSON_DEPTH} levels.")
    if isinstance(obj, bool):
        return True
    if isinstance(obj, int):
        if abs(obj) > MAX_SAFE_INTEGER:
            raise EnvelopeError("not_canonical", "Integers must stay within +-(2^53-1).")
        return True
    if isinstance(obj, float):
        if not math.isfinite(obj):
            raise EnvelopeError("not_canonical", "NaN and infinities are not JSON numbers.")
        return 1e-4 <= abs(obj) < 1e16 and not obj.is_integer()
    if isinstance(obj, Mapping):
        plain = True
        for key, value in obj.items():
            # Not short-circuited: every number is checked whatever the keys are.
            plain = _check_numbers(value, depth + 1) and plain and isinstance(key, str) and key.isascii()
        return plain
    if isinstance(obj, list):
        plain = True
        for value in obj:
            plain = _check_numbers(value, depth + 1) and plain
        return plain
    return obj is None or isinstance(obj, str)


def _refuse_constant(name: str) -> Any:
    raise EnvelopeError("bad_json", f"{name} is not valid JSON.")


def _refuse_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise EnvelopeError("bad_json", f"Duplicate key {key!r} in JSON object.", key)
        result[key] = value
    return result


def _depth(text: str) -> int:
    """Maximum bracket depth, ignoring brackets inside strings; runs before json.loads so a
    deeply nested body never reaches the recursive parser."""
    depth = deepest = 0
    in_string = escaped = False
    for char in text:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif char in "]}":
            depth -= 1
    return deepest


def strict_loads(raw: bytes) -> Any:
    """Parse JSON bytes refusing invalid UTF-8, duplicate keys, NaN/Infinity and deep nesting."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise EnvelopeError("bad_json", "Body is not valid UTF-8.") from None
    if _depth(text) > MAX_JSON_DEPTH:
        raise EnvelopeError("too_deep", f"JSON nests deeper than {MAX_JSON_DEPTH} levels.")
    try:
        return json.loads(text, object_pairs_hook=_refuse_duplicates, parse_constant=_refuse_constant)
    except json.JSONDecodeError as exc:
        raise EnvelopeError("bad_json", f"Body is not valid JSON: {exc.msg} at position {exc.pos}.") from None
    except ValueError:  # an integer past Python's int-string limit (4300 digits): no JSON error of its own
        raise EnvelopeError("bad_json", "Body holds a number too long to parse.") from None


def parse_canonical_payload(raw: bytes) -> dict[str, Any]:
    """Parse payload bytes and insist they are exactly the canonical form of their own parse."""
    obj = strict_loads(raw)
    if not isinstance(obj, dict):
        raise EnvelopeError("bad_payload", "Payload must be a JSON object.", "payload")
    if canonical_bytes(obj) != raw:
        raise EnvelopeError(
            "not_canonical", "Payload bytes are not the RFC 8785 canonical form of the payload.", "payload"
        )
    return obj


def is_strong_public_key(public_key: bytes) -> bool:
    """libsodium's check: 32 bytes, canonical encoding, on the curve, not of small order."""
    return len(public_key) == 32 and bool(nacl.bindings.crypto_core_ed25519_is_valid_point(public_key))


@dataclass(frozen=True)
class Signer:
    """An Ed25519 key able to sign envelopes."""

    signing_key: nacl.signing.SigningKey

    @classmethod
    def from_seed(cls, seed: bytes) -> Signer:
        return cls(nacl.signing.SigningKey(seed))

    @classmethod
    def generate(cls) -> Signer:
        return cls(nacl.signing.SigningKey.generate())

    @property
    def seed(self) -> bytes:
        return bytes(self.signing_key)

    @property
    def public_key(self) -> bytes:
        return bytes(self.signing_key.verify_key)

    @property
    def public_key_b64(self) -> str:
        return b64encode(self.public_key)

    @property
    def keyid(self) -> str:
        return keyid_of(self.public_key)

    def signature(self, payload_type: str, body: bytes) -> dict[str, str]:
        sig = self.signing_key.sign(pae(payload_type, body)).signature
        return {"keyid": self.keyid, "sig": b64encode(sig)}


def sign(payload: Mapping[str, Any], payload_type: str, signers: Iterable[Signer]) -> dict[str, Any]:
    """Build an envelope whose payload is the canonical form of `payload`."""
    body = canonical_bytes(payload)
    return {
        "payloadType": payload_type,
        "payload": b64encode(body),
        "signatures": [signer.signature(payload_type, body) for signer in signers],
    }


def envelope_bytes(envelope: Mapping[str, Any]) -> bytes:
    """The bytes an agent sends and stores: the envelope itself in canonical form."""
    return canonical_bytes(envelope)


@dataclass(frozen=True)
class OpenedEnvelope:
    payload_type: str
    payload: bytes
    signatures: tuple[tuple[str, bytes], ...]  # (keyid, 64-byte signature), in envelope order

    @property
    def keyids(self) -> tuple[str, ...]:
        return tuple(keyid for keyid, _ in self.signatures)


def open_envelope(envelope: Any, expected_type: str | None = None) -> OpenedEnvelope:
    """Check an envelope's shape and decode it; signatures are NOT verified yet."""
    if not isinstance(envelope, dict):
        raise EnvelopeError("bad_envelope", "Envelope must be a JSON object.")
    unknown = set(envelope) - {"payloadType", "payload", "signatures"}
    if unknown:
        name = sorted(unknown)[0]
        raise EnvelopeError("bad_envelope", f"Unknown envelope field {name!r}.", name)
    payload_type = envelope.get("payloadType")
    if payload_type not in PAYLOAD_TYPES:
        raise EnvelopeError("bad_envelope", "payloadType is not a benchhub payload type.", "payloadType")
    if expected_type is not None and payload_type != expected_type:
        raise EnvelopeError("wrong_payload_type", f"This endpoint takes {expected_type}.", "payloadType")
    body = b64decode(envelope.get("payload"), "payload")
    raw_signatures = envelope.get("signatures")
    if not isinstance(raw_signatures, list) or not 1 <= len(raw_signatures) <= 2:
        raise EnvelopeError("bad_envelope", "signatures must be a list of one or two entries.", "signatures")
    signatures: list[tuple[str, bytes]] = []
    for index, entry in enumerate(raw_signatures):
        where = f"signatures[{index}]"
        if not isinstance(entry, dict) or set(entry) != {"keyid", "sig"}:
            raise EnvelopeError("bad_envelope", f"{where} must have exactly keyid and sig.", where)
        keyid = entry["keyid"]
        if not isinstance(keyid, str) or len(keyid) != 64 or keyid != keyid.lower() or not _is_hex(keyid):
            raise EnvelopeError("bad_envelope", f"{where}.keyid must be 64 lowercase hex.", f"{where}.keyid")
        sig = b64decode(entry["sig"], f"{where}.sig")
        if len(sig) != 64:
            raise EnvelopeError("bad_envelope", f"{where}.sig must decode to 64 bytes.", f"{where}.sig")
        if any(keyid == seen for seen, _ in signatures):
            raise EnvelopeError("bad_envelope", "The same keyid signs twice.", f"{where}.keyid")
        signatures.append((keyid, sig))
    return OpenedEnvelope(payload_type, body, tuple(signatures))


def _is_hex(text: str) -> bool:
    return all(c in "0123456789abcdef" for c in text)


def verify_signature(opened: OpenedEnvelope, keyid: str, public_key: bytes) -> bool:
    """True when the signature made under `keyid` verifies with `public_key` over the exact bytes."""
    if keyid_of(public_key) != keyid or not is_strong_public_key(public_key):
        return False
    for signed_by, sig in opened.signatures:
        if signed_by == keyid:
            try:
                nacl.signing.VerifyKey(public_key).verify(pae(opened.payload_type, opened.payload), sig)
            except (nacl.exceptions.BadSignatureError, nacl.exceptions.ValueError):
                return False
            return True
    return False
