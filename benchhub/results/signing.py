"""The moderator's side of campaign versions, on the machine that holds the offline campaign key
(docs/campaigns.md): make a key, pin a variant that tracks a ref, sign a version file. Nothing here
reads settings or the database: the service never holds the private key."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from benchhub_protocol import campaign_versions, envelope

GIT_TIMEOUT_S = 600


class SigningError(Exception):
    """One sentence for the moderator."""


def new_key(path: Path) -> envelope.Signer:
    """A fresh campaign key, its seed written in hex to a file only its owner reads."""
    if path.exists():
        raise SigningError(f"{path} exists: a campaign key is never overwritten.")
    signer = envelope.Signer.generate()
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "w") as handle:
        handle.write(signer.seed.hex() + "\n")
    return signer


def load_key(path: Path) -> envelope.Signer:
    if not path.is_file():
        raise SigningError(f"No campaign key at {path}.")
    if path.stat().st_mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise SigningError(f"{path} can be read by others: chmod 600 it (it is the campaign's private key).")
    try:
        seed = bytes.fromhex(path.read_text().strip())
    except ValueError:
        seed = b""
    if len(seed) != 32:
        raise SigningError(f"{path} does not hold a campaign key (64 hex characters).")
    return envelope.Signer.from_seed(seed)


def key_entry(signer: envelope.Signer, note: str) -> dict[str, str]:
    """The line of campaigns/keys.json that trusts this key."""
    return {"keyid": signer.keyid, "public_key": signer.public_key_b64, "note": note}


def read_version(path: Path) -> dict[str, Any]:
    try:
        found = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise SigningError(f"{path} is not a readable JSON version file: {error}.") from None
    if not isinstance(found, dict) or not isinstance(found.get("version"), int) or "slug" not in found:
        raise SigningError(f"{path} is not a campaign version (it needs slug and version).")
    return found


def write_version(path: Path, manifest: dict[str, Any]) -> None:
    path.write_text(json.dumps(manifest, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def sign(manifest: dict[str, Any], signer: envelope.Signer) -> dict[str, Any]:
    """The version with its signature; a variant without a commit cannot be signed (it stays a draft)."""
    unpinned = campaign_versions.unpinned(manifest)
    if unpinned:
        raise SigningError(
            f"Variant {unpinned[0]} of {manifest['slug']} names no commit: pin it (pin_campaign_variant) first."
        )
    body = campaign_versions.signed_body(manifest)
    return {**body, "signature": campaign_versions.sign(body, signer)}


def resolve_ref(repo: str, ref: str) -> tuple[str, str]:
    """The commit `ref` points to in `repo` now, and its committer date: fetched once, never again."""
    with tempfile.TemporaryDirectory(prefix="benchhub-pin-") as folder:
        try:
            subprocess.run(["git", "init", "--quiet", folder], check=True, capture_output=True, timeout=60)
            subprocess.run(
                ["git", "-C", folder, "fetch", "--quiet", "--depth=1", "--", repo, ref],
                check=True,
                capture_output=True,
                text=True,
                timeout=GIT_TIMEOUT_S,
            )
            shown = subprocess.run(
                ["git", "-C", folder, "show", "-s", "--format=%H %cI", "FETCH_HEAD"],
                check=True,
                capture_output=True,
                text=True,
                timeout=60,
            ).stdout.split()
        except subprocess.CalledProcessError as error:
            detail = (error.stderr or "").strip().splitlines()
            raise SigningError(f"Could not fetch {ref} from {repo}: {detail[-1] if detail else error}.") from None
        except (OSError, subprocess.TimeoutExpired) as error:
            raise SigningError(f"Could not fetch {ref} from {repo}: {error}.") from None
    return shown[0], shown[1]


def pinned(manifest: dict[str, Any], variant: str, commit: str, date: str) -> dict[str, Any]:
    """The next version (unsigned): `variant` pinned to `commit`, its ref kept to say where it came from."""
    body = campaign_versions.signed_body(manifest)
    names = [entry["name"] for entry in body["variants"]]
    if variant not in names:
        raise SigningError(f"{body['slug']} has no variant {variant!r} ({', '.join(names)}).")
    variants = [
        {**entry, "commit": commit, "pinned_at": date} if entry["name"] == variant else entry
        for entry in body["variants"]
    ]
    return {**body, "version": body["version"] + 1, "variants": variants}
