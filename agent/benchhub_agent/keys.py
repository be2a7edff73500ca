"""This machine's Ed25519 key (written once, 0600, atomically) and its registration with a server."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from benchhub_protocol.envelope import REGISTRATION_TYPE, Signer, envelope_bytes, sign
from benchhub_protocol.schema import SchemaViolation, validate_registration

from . import client
from .dirs import Dirs, write_atomic
from .errors import AgentError, ExitCode

KEY_FILE = "ed25519.seed"


def key_path(dirs: Dirs) -> Path:
    return dirs.keys / KEY_FILE


def read_key(path: Path) -> Signer:
    try:
        seed = bytes.fromhex(path.read_text().strip())
    except (OSError, ValueError) as error:
        raise AgentError(ExitCode.FAILURE, f"Could not read a key from {path}.") from error
    if len(seed) != 32:
        raise AgentError(ExitCode.FAILURE, f"{path} does not hold a 32-byte Ed25519 seed.")
    return Signer.from_seed(seed)


def load_or_create(dirs: Dirs) -> Signer:
    path = key_path(dirs)
    if path.exists():
        return read_key(path)
    signer = Signer.generate()
    write_atomic(path, (signer.seed.hex() + "\n").encode(), mode=0o600)
    return signer


def now_rfc3339() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def registration_envelope(handle: str, new_key: Signer, existing_key: Signer | None = None) -> dict[str, Any]:
    """Signed by the key being registered; linking a second key to a handle adds a signature by a key
    already on it (docs/protocol.md 3)."""
    payload = {"schema_version": 1, "handle": handle, "public_key": new_key.public_key_b64, "created_at": now_rfc3339()}
    try:
        validate_registration(payload)
    except SchemaViolation as error:
        raise AgentError(ExitCode.USAGE, f"Handle {handle!r} is not valid: 1-39 letters, digits or '-'.") from error
    signers = [new_key] if existing_key is None else [new_key, existing_key]
    return sign(payload, REGISTRATION_TYPE, signers)


def _records_path(dirs: Dirs) -> Path:
    return dirs.config / "registrations.json"


def registered_handle(dirs: Dirs, server: str, keyid: str) -> str | None:
    try:
        records = json.loads(_records_path(dirs).read_text())
    except (OSError, ValueError):
        return None
    entry = records.get(server.rstrip("/"), {})
    return entry.get("handle") if entry.get("keyid") == keyid else None


def register(dirs: Dirs, server: str, handle: str, signer: Signer, existing_key: Signer | None = None) -> str:
    body = envelope_bytes(registration_envelope(handle, signer, existing_key))
    response = client.post_envelope(server, "/api/v1/contributors/", body)
    if response.status not in (200, 201):
        detail = response.body.get("detail") or response.body.get("error") or f"HTTP {response.status}"
        raise AgentError(ExitCode.UPLOAD, f"Registering {handle!r} on {server} failed: {detail}")
    try:
        records = json.loads(_records_path(dirs).read_text())
    except (OSError, ValueError):
        records = {}
    records[server.rstrip("/")] = {"handle": response.body.get("handle", handle), "keyid": signer.keyid}
    write_atomic(_records_path(dirs), json.dumps(records, indent=1, sort_keys=True).encode(), mode=0o600)
    return str(response.body.get("handle", handle))
