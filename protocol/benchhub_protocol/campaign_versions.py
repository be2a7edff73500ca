"""Campaign versions (docs/protocol.md, campaign versions): what a version's digest covers, how the
offline campaign key signs it, which keys the agent and the service trust, and what a new version
changed. Shared, pure, no network: the agent verifies with it, the service publishes with it, and
the bundled versions under campaigns/<slug>/v<N>.json are read through it.

A version file is its manifest plus `signature` (standard base64 of an Ed25519 signature, or null
for a draft). The digest is the SHA-256 of the RFC 8785 form of the manifest less the few fields a
server adds per deployment, none of which can make a machine run other code: `digest`, `signature`
and `state` at the top, a variant's `available` and `unavailable_reason` (a variant marked
unavailable runs nothing), and a patch's `url` (its bytes must match the signed sha256).
"""

from __future__ import annotations

import binascii
import hashlib
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from importlib import resources
from typing import Any

import nacl.exceptions
import nacl.signing

from . import envelope

# What the campaign key signs: PAE(SIGNATURE_TYPE, the digest in hex), so that no signature over
# a submission, a registration or anything else can ever pass for a campaign's.
SIGNATURE_TYPE = "application/vnd.benchhub.campaign-version.v1"
UNSIGNED_TOP = frozenset({"digest", "signature", "state"})
UNSIGNED_VARIANT = frozenset({"available", "unavailable_reason"})
UNSIGNED_PATCH = frozenset({"url"})
STATES = ("draft", "open", "superseded", "closed")
_VERSION_FILE = re.compile(r"v([1-9][0-9]{0,5})\.json")


def signed_body(manifest: Mapping[str, Any]) -> dict[str, Any]:
    """The manifest as its digest covers it."""
    body = {key: value for key, value in manifest.items() if key not in UNSIGNED_TOP}
    if isinstance(body.get("variants"), list):
        body["variants"] = [_signed_variant(variant) for variant in body["variants"]]
    return body


def _signed_variant(variant: Any) -> Any:
    if not isinstance(variant, Mapping):
        return variant
    kept = {key: value for key, value in variant.items() if key not in UNSIGNED_VARIANT}
    if isinstance(kept.get("patches"), list):
        kept["patches"] = [
            {key: value for key, value in patch.items() if key not in UNSIGNED_PATCH}
            if isinstance(patch, Mapping)
            else patch
            for patch in kept["patches"]
        ]
    return kept


def digest(manifest: Mapping[str, Any]) -> str:
    return hashlib.sha256(envelope.canonical_bytes(signed_body(manifest))).hexdigest()


def signature_message(version_digest: str) -> bytes:
    return envelope.pae(SIGNATURE_TYPE, version_digest.encode("ascii"))


def sign(manifest: Mapping[str, Any], signer: envelope.Signer) -> str:
    """The signature over the manifest's digest, as a version file and the API carry it."""
    signed = signer.signing_key.sign(signature_message(digest(manifest))).signature
    return envelope.b64encode(signed)


def verify(manifest: Mapping[str, Any], trusted: Mapping[str, bytes]) -> str | None:
    """The keyid of the trusted key whose signature the manifest carries over its own digest; None
    when it carries none that verifies (no signature, a changed field, an untrusted key, or a
    `digest` that is not the manifest's)."""
    signature = manifest.get("signature")
    if not isinstance(signature, str):
        return None
    try:
        raw = envelope.b64decode(signature, "signature")
        own = digest(manifest)
    except (envelope.EnvelopeError, TypeError, ValueError):
        return None
    if len(raw) != 64 or manifest.get("digest", own) != own:
        return None
    message = signature_message(own)
    for keyid, public_key in sorted(trusted.items()):
        try:
            nacl.signing.VerifyKey(public_key).verify(message, raw)
        except (nacl.exceptions.BadSignatureError, nacl.exceptions.ValueError, binascii.Error):
            continue
        return keyid
    return None


def _campaigns_folder() -> Any:
    return resources.files(__package__).joinpath("campaigns")


def trusted_keys() -> dict[str, bytes]:
    """keyid -> public key of every campaign key this release trusts (campaigns/keys.json). A new key
    comes with a release, never over the network (docs/campaigns.md, "Keys")."""
    listed = json.loads(_campaigns_folder().joinpath("keys.json").read_text(encoding="utf-8"))
    return keys_from(listed["keys"])


def keys_from(entries: Iterable[Mapping[str, Any]]) -> dict[str, bytes]:
    found = {}
    for entry in entries:
        public_key = envelope.b64decode(entry["public_key"], "public_key")
        if envelope.keyid_of(public_key) != entry["keyid"] or not envelope.is_strong_public_key(public_key):
            raise ValueError(f"campaign key {entry['keyid']} is not a valid key with that keyid")
        found[entry["keyid"]] = public_key
    return found


def bundled_versions() -> dict[str, list[dict[str, Any]]]:
    """slug -> its version files, oldest first."""
    found: dict[str, list[dict[str, Any]]] = {}
    for folder in sorted(_campaigns_folder().iterdir(), key=lambda item: item.name):
        if not folder.is_dir():
            continue
        versions = []
        for entry in folder.iterdir():
            match = _VERSION_FILE.fullmatch(entry.name)
            if match is None:
                continue
            version = json.loads(entry.read_text(encoding="utf-8"))
            if version.get("slug") != folder.name or version.get("version") != int(match[1]):
                raise ValueError(f"campaigns/{folder.name}/{entry.name} names another slug or version")
            versions.append(version)
        found[folder.name] = sorted(versions, key=lambda version: int(version["version"]))
    return found


def unpinned(manifest: Mapping[str, Any]) -> list[str]:
    """The variants that name no commit: a version with one is a draft, never runnable."""
    return [variant["name"] for variant in manifest["variants"] if not variant.get("commit")]


def measured(manifest: Mapping[str, Any]) -> dict[str, Any]:
    """What a version makes a machine measure: a new version that changes it supersedes the cells
    of the older ones (rules such as min_effect or plausible_ratio do not)."""
    return {
        "repo": manifest["repo"],
        "baseline": manifest["baseline"],
        "variants": [
            {
                "name": variant["name"],
                "commit": variant.get("commit"),
                "patches": [[patch["name"], patch["sha256"]] for patch in variant.get("patches", [])],
                "env": variant.get("env", {}),
            }
            for variant in manifest["variants"]
        ],
        "sweep": manifest["sweep"],
    }


def measured_from(versions: Sequence[Mapping[str, Any]]) -> dict[int, int]:
    """version -> the version its cells belong to: the earliest one since which nothing measured
    changed. `versions` are one campaign's published versions, oldest first."""
    found: dict[int, int] = {}
    previous: Mapping[str, Any] | None = None
    for version in versions:
        number = int(version["version"])
        same = previous is not None and measured(previous) == measured(version)
        found[number] = found[int(previous["version"])] if same and previous is not None else number
        previous = version
    return found


def _shown(key: str, value: Any) -> str:
    if key == "patches" and isinstance(value, list):
        return str([f"{patch['name']} ({patch['sha256'][:12]})" for patch in value])
    return str(value)


def _differences(where: str, old: Mapping[str, Any], new: Mapping[str, Any], skip: Iterable[str] = ()) -> list[str]:
    found = []
    for key in sorted((set(old) | set(new)) - set(skip)):
        before, after = old.get(key), new.get(key)
        if before == after:
            continue
        if key == "description" or (isinstance(before, str) and len(before) > 80):
            found.append(f"{where}{key} changed")
        else:
            found.append(f"{where}{key}: {_shown(key, before)} -> {_shown(key, after)}")
    return found


def changes(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    """What a version changed from the one before it, one short phrase each."""
    olds = {variant["name"]: variant for variant in old["variants"]}
    news = {variant["name"]: variant for variant in new["variants"]}
    found = [f"variant {name} added" for name in news.keys() - olds.keys()]
    found += [f"variant {name} removed" for name in olds.keys() - news.keys()]
    for name in sorted(olds.keys() & news.keys()):
        found += _differences(f"variant {name} ", olds[name], news[name], ("name", *UNSIGNED_VARIANT))
    found += _differences("sweep.", old["sweep"], new["sweep"])
    found += _differences("", old, new, ("variants", "sweep", "version", *UNSIGNED_TOP))
    return found
