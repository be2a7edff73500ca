"""The campaign a run follows: the server's manifest, or the copy bundled with the agent.

The bundled definition names patch files; their hashes are computed from the bundled files. A server
manifest is checked field by field first (manifest.py), then gives each patch's sha256 and URL: the
agent downloads it, checks the hash and refuses a mismatch. Either way every patch the agent applies
has been hashed from the exact bytes applied. The hash says nothing of whether the code is safe to
run (the server supplies both): trust.py asks about code that is not bundled.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from . import client
from . import manifest as manifest_rules
from .dirs import Dirs, write_atomic
from .errors import AgentError, ExitCode


@dataclass(frozen=True)
class Patch:
    name: str
    sha256: str
    path: Path


@dataclass(frozen=True)
class Variant:
    name: str
    commit: str  # empty until a variant that follows a ref is resolved
    patches: tuple[Patch, ...]
    env: dict[str, str] = field(default_factory=dict)
    ref: str | None = None

    def as_payload(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "commit": self.commit,
            "patches": [{"name": patch.name, "sha256": patch.sha256} for patch in self.patches],
            "env": dict(self.env),
        }


@dataclass(frozen=True)
class Campaign:
    slug: str
    repo: str
    baseline: str
    variants: tuple[Variant, ...]
    sweep: dict[str, Any]
    source: str  # "server" or "bundled": said in the output so a user knows what was followed
    min_effect: float = (
        0.02  # the smallest effect worth reporting (docs/protocol.md section 6): verdicts and the sweep's target
    )

    def variant(self, name: str) -> Variant:
        for variant in self.variants:
            if variant.name == name:
                return variant
        raise AgentError(ExitCode.CAMPAIGN, f"Campaign {self.slug} has no variant {name!r}.")


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _bundled_data() -> Path:
    return Path(str(resources.files("benchhub_agent") / "data"))


def bundled(slug: str) -> Campaign:
    path = Path(str(resources.files("benchhub_protocol") / "campaigns")) / f"{slug}.json"
    if not path.is_file():
        raise AgentError(ExitCode.CAMPAIGN, f"No campaign {slug!r} is bundled with this agent and no server gave one.")
    definition = json.loads(path.read_text())
    patch_dir = _bundled_data() / "patches"
    variants = []
    for entry in definition["variants"]:
        patches = []
        for name in entry["patches"]:
            patch_path = patch_dir / name
            if not patch_path.is_file():
                raise AgentError(ExitCode.CAMPAIGN, f"The bundled patch {name} of campaign {slug} is missing.")
            patches.append(Patch(name, _sha256(patch_path.read_bytes()), patch_path))
        variants.append(
            Variant(entry["name"], entry["commit"] or "", tuple(patches), dict(entry["env"]), entry.get("ref"))
        )
    return Campaign(
        definition["slug"],
        definition["repo"],
        definition["baseline"],
        tuple(variants),
        dict(definition["sweep"]),
        "bundled",
        float(definition.get("min_effect", 0.02)),
    )


def from_manifest(manifest: dict[str, Any], dirs: Dirs, slug: str | None = None, server: str = "") -> Campaign:
    """A server manifest, every field checked before use, with each patch downloaded once into the cache
    and verified against its sha256."""
    slug = slug or str(manifest.get("slug"))
    manifest_rules.validate(manifest, slug, client.is_loopback(urlsplit(server).hostname))
    variants = []
    for entry in manifest["variants"]:
        if not entry.get("available", True):
            continue
        patches = tuple(_fetch_patch(p["name"], p["sha256"], p["url"], dirs) for p in entry["patches"])
        variants.append(
            Variant(entry["name"], entry.get("commit") or "", patches, dict(entry.get("env") or {}), entry.get("ref"))
        )
    if manifest["baseline"] not in {variant.name for variant in variants}:
        raise AgentError(ExitCode.CAMPAIGN, f"The server lists campaign {slug}'s baseline as unavailable.")
    sweep = manifest_rules.sweep_settings(manifest["sweep"])
    min_effect = manifest.get("min_effect")
    if not isinstance(min_effect, (int, float)) or isinstance(min_effect, bool) or not 0 < min_effect < 1:
        min_effect = 0.02  # absent or nonsensical: the protocol's default (the service judges with its own copy)
    return Campaign(slug, manifest["repo"], manifest["baseline"], tuple(variants), sweep, "server", float(min_effect))


def _fetch_patch(name: str, sha256: str, url: str, dirs: Dirs) -> Patch:
    # name and sha256 were checked against plain patterns: this path stays under the cache.
    cached = dirs.cache / "patches" / sha256 / name
    if cached.is_file() and _sha256(cached.read_bytes()) == sha256:
        return Patch(name, sha256, cached)
    data = client.download(url)
    actual = _sha256(data)
    if actual != sha256:
        raise AgentError(
            ExitCode.CAMPAIGN, f"Patch {name} from {url} has sha256 {actual}, the manifest says {sha256}: refused."
        )
    write_atomic(cached, data)
    return Patch(name, sha256, cached)


def load(slug: str, server: str | None, dirs: Dirs, required: bool = False) -> tuple[Campaign, str | None]:
    """The server's manifest when it answers, else the bundled copy; the second value says why it fell back.
    `required` (a run that will upload): no fallback, so a wrong server or campaign fails before building."""
    if not manifest_rules.SLUG.fullmatch(slug):
        raise AgentError(ExitCode.USAGE, f"--campaign {slug!r} is not a campaign slug (letters, digits, '-', '_').")
    if not server:
        return bundled(slug), "no server given"
    with client.phase("loading the campaign", client.CAMPAIGN_DEADLINE_S):
        return _load_from(slug, server, dirs, required)


def _load_from(slug: str, server: str, dirs: Dirs, required: bool) -> tuple[Campaign, str | None]:
    try:
        response = client.get_json(server, f"/api/v1/campaigns/{slug}/")
    except AgentError as error:
        if required or error.code != ExitCode.UPLOAD:
            raise
        return bundled(slug), error.message
    if response.status != 200:
        if required:
            raise AgentError(
                ExitCode.CAMPAIGN, f"{server} has no campaign {slug} (HTTP {response.status}): check --campaign."
            )
        return bundled(slug), f"the server answered HTTP {response.status} for campaign {slug}"
    return from_manifest(response.body, dirs, slug, server), None
