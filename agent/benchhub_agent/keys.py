"""This machine's Ed25519 key (written once, 0600, atomically) and its registration with a server.

A key is one machine (docs/protocol.md, cells): beside the key, `machine.json` records the facts that
identify the hardware it was made on (chip, GPU cores, memory). A home directory copied to another
machine would sign that machine's results with the first one's key, so when those facts change the
agent makes a new key, keeps the old one as `previous-<keyid>.seed`, and links the new key to the
same handle with both signatures (docs/protocol.md section 3) at its next registration."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from benchhub_protocol import payloads
from benchhub_protocol.envelope import REGISTRATION_TYPE, Signer, envelope_bytes, sign
from benchhub_protocol.schema import SchemaViolation, validate_registration

from . import client
from .dirs import Dirs, write_atomic
from .errors import AgentError, ExitCode

KEY_FILE = "ed25519.seed"
MACHINE_FILE = "machine.json"
IDENTITY = ("chip", "gpu_cores", "memory_bytes")


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


def identity(facts: dict[str, Any]) -> dict[str, Any]:
    return {name: facts.get(name) for name in IDENTITY}


def for_machine(dirs: Dirs, facts: dict[str, Any], say: Callable[[str], None]) -> Signer:
    """The key of the machine these facts describe: this home's key, or a new one when the home's
    key was made on other hardware (the old one is kept, to vouch for the new one)."""
    signer = load_or_create(dirs)
    record = dirs.keys / MACHINE_FILE
    try:
        recorded = json.loads(record.read_text())
    except (OSError, ValueError):
        recorded = None  # a key from before the record: it is this machine's
    now = identity(facts)
    if recorded is not None and recorded != now:
        write_atomic(dirs.keys / f"previous-{signer.keyid}.seed", (signer.seed.hex() + "\n").encode(), mode=0o600)
        signer = Signer.generate()
        write_atomic(key_path(dirs), (signer.seed.hex() + "\n").encode(), mode=0o600)
        say(
            f"This home's key was made on other hardware ({_described(recorded)}, now {_described(now)}), "
            f"so this machine gets a key of its own ({signer.keyid[:16]}…), linked to the same handle."
        )
    if recorded != now:
        write_atomic(record, json.dumps(now, sort_keys=True).encode(), mode=0o600)
    return signer


def _described(facts: dict[str, Any]) -> str:
    cores = f" {facts.get('gpu_cores')}-core GPU" if facts.get("gpu_cores") else ""
    return f"{facts.get('chip')}{cores}, {int(facts.get('memory_bytes') or 0) // 2**30} GiB"


def previous_key(dirs: Dirs, keyid: str) -> Signer | None:
    path = dirs.keys / f"previous-{keyid}.seed"
    return read_key(path) if path.exists() else None


def now_rfc3339() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def registration_envelope(handle: str, new_key: Signer, existing_key: Signer | None = None) -> dict[str, Any]:
    """Signed by the key being registered; linking a second key to a handle adds a signature by a key
    already on it (docs/protocol.md 3)."""
    payload = payloads.registration(new_key, handle, now_rfc3339())
    try:
        validate_registration(payload)
    except SchemaViolation as error:
        raise AgentError(ExitCode.USAGE, f"Handle {handle!r} is not valid: 1-39 letters, digits or '-'.") from error
    signers = [new_key] if existing_key is None else [new_key, existing_key]
    return sign(payload, REGISTRATION_TYPE, signers)


def _records_path(dirs: Dirs) -> Path:
    return dirs.config / "registrations.json"


def _record(dirs: Dirs, server: str) -> dict[str, Any]:
    try:
        entry = json.loads(_records_path(dirs).read_text()).get(server.rstrip("/"), {})
    except (OSError, ValueError, AttributeError):
        return {}
    return entry if isinstance(entry, dict) else {}


def registered_handle(dirs: Dirs, server: str, keyid: str) -> str | None:
    entry = _record(dirs, server)
    return entry.get("handle") if entry.get("keyid") == keyid else None


def handle_of_previous_key(dirs: Dirs, server: str) -> tuple[str, Signer] | None:
    """The handle this home registered on the server with a key it has since replaced (the machine
    changed), and that key, to sign the new key's registration with."""
    entry = _record(dirs, server)
    previous = previous_key(dirs, str(entry.get("keyid", ""))) if entry.get("handle") else None
    return (str(entry["handle"]), previous) if previous else None


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
