"""Assembling, validating and signing the schema v1 submission payload."""

from __future__ import annotations

import secrets
from typing import Any

from benchhub_protocol.envelope import SUBMISSION_TYPE, Signer, envelope_bytes, sign
from benchhub_protocol.schema import FLAGS, validate_submission

from . import __version__
from .keys import now_rfc3339


def assemble(
    *,
    campaign: str,
    campaign_digest: str | None,
    machine: dict[str, Any],
    model: dict[str, Any],
    llama_cpp: dict[str, Any],
    variants: list[dict[str, Any]],
    sweep: dict[str, Any],
    correctness: list[dict[str, Any]],
    generation: list[dict[str, Any]],
    flags: list[str],
) -> dict[str, Any]:
    payload = {
        "schema_version": 1,
        "nonce": secrets.token_hex(16),
        "created_at": now_rfc3339(),
        "agent": {"name": "benchhub-agent", "version": __version__},
        "campaign": campaign,
        **({"campaign_digest": campaign_digest} if campaign_digest else {}),
        "machine": machine,
        "model": model,
        "llama_cpp": llama_cpp,
        "variants": variants,
        "sweep": sweep,
        "correctness": correctness,
        "generation": generation,
        "flags": [flag for flag in FLAGS if flag in set(flags)],  # one order, no repeats
    }
    # What the agent signs must be what the server accepts: the same schema checks it first.
    validate_submission(payload)
    return payload


def signed_bytes(payload: dict[str, Any], signer: Signer) -> bytes:
    return envelope_bytes(sign(payload, SUBMISSION_TYPE, [signer]))
