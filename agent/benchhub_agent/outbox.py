"""Signed results waiting to be published. A result is written here before the first upload attempt
and removed only when the server has accepted it (200 or 201), so nothing is lost to a crash or an
outage, and a retry is safe: the nonce makes the same envelope idempotent on the server."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from benchhub_protocol.envelope import EnvelopeError, open_envelope, strict_loads

from . import client
from .dirs import Dirs, write_atomic
from .errors import AgentError, ExitCode


class UnknownKey(AgentError):
    """The server does not know this key (never registered there, or its database was reset)."""


def put(dirs: Dirs, nonce: str, envelope_bytes: bytes) -> Path:
    path = dirs.outbox / f"{nonce}.json"
    write_atomic(path, envelope_bytes)
    return path


def pending(dirs: Dirs) -> list[Path]:
    return sorted(dirs.outbox.glob("*.json")) if dirs.outbox.is_dir() else []


def send(path: Path, server: str, dirs: Dirs) -> dict[str, Any]:
    """Upload one envelope file; it leaves the outbox (if it is in it) only once accepted."""
    body = path.read_bytes()
    try:
        open_envelope(strict_loads(body))
    except EnvelopeError as error:
        raise AgentError(ExitCode.UPLOAD, f"{path} is not a signed benchhub envelope: {error.detail}") from error
    response = client.post_envelope(server, "/api/v1/submissions/", body)
    if response.status in (200, 201):
        if path.parent.resolve() == dirs.outbox.resolve():
            path.unlink(missing_ok=True)
        return response.body
    detail = response.body.get("detail") or response.body.get("error") or ""
    if response.status == 401 and response.body.get("error") == "unknown_key":
        raise UnknownKey(ExitCode.UPLOAD, f"The server does not know the key that signed {path.name}.")
    field = response.body.get("field")
    where = f" (field {field})" if field else ""
    raise AgentError(
        ExitCode.UPLOAD, f"The server refused {path.name} with HTTP {response.status}: {detail}{where}".rstrip(": ")
    )
