"""Withdrawing a published result: a signed request, by the key that signed the result, that the server
stop showing it (PROTOCOL: `POST /api/v1/submissions/{id}/withdraw`)."""

from __future__ import annotations

import uuid
from typing import Any

from benchhub_protocol.envelope import WITHDRAWAL_TYPE, Signer, envelope_bytes, sign

from . import client
from .errors import AgentError, ExitCode
from .keys import now_rfc3339


def submission_id(text: str) -> str:
    """The canonical form of a submission's UUID; anything else never reaches the URL."""
    try:
        return str(uuid.UUID(text))
    except ValueError as error:
        raise AgentError(ExitCode.USAGE, f"{text[:80]!r} is not a submission id (a UUID).") from error


def withdrawal_envelope(submission: str, signer: Signer) -> bytes:
    payload = {"schema_version": 1, "submission": submission, "created_at": now_rfc3339()}
    return envelope_bytes(sign(payload, WITHDRAWAL_TYPE, [signer]))


def withdraw(server: str, text_id: str, signer: Signer) -> dict[str, Any]:
    submission = submission_id(text_id)
    response = client.post_envelope(
        server, f"/api/v1/submissions/{submission}/withdraw", withdrawal_envelope(submission, signer)
    )
    if response.status == 200:
        return response.body
    if response.status == 403:
        reason = "it was signed by another key than this machine's"
    elif response.status == 404:
        reason = "the server has no such submission"
    elif response.status == 401:
        reason = "the server does not know this machine's key"
    else:
        detail = response.body.get("detail") or response.body.get("error") or "no reason given"
        reason = f"HTTP {response.status}, {str(detail).rstrip('.')}"
    raise AgentError(ExitCode.UPLOAD, f"{server} did not withdraw {submission}: {reason}.")
