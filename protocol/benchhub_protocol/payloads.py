"""Synthetic signed messages for the tests, the bench and the demo: one way to sign a registration
and a submission, so that every caller sends exactly what the agent sends (docs/protocol.md 2-4)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from benchhub_protocol import envelope

CREATED_AT = "2026-11-29T10:00:00Z"


def signed_registration(
    signer: envelope.Signer, handle: str, *vouchers: envelope.Signer, created_at: str = CREATED_AT
) -> bytes:
    """The envelope that registers `signer` under `handle`; with vouchers (keys already on the
    handle) it links a further machine's key."""
    payload = {"schema_version": 1, "handle": handle, "public_key": signer.public_key_b64, "created_at": created_at}
    return envelope.envelope_bytes(envelope.sign(payload, envelope.REGISTRATION_TYPE, [signer, *vouchers]))


def signed_submission(payload: Mapping[str, Any], signer: envelope.Signer) -> bytes:
    return envelope.envelope_bytes(envelope.sign(payload, envelope.SUBMISSION_TYPE, [signer]))
