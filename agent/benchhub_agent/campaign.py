"""The campaign a run follows: the server's manifest, or the newest version bundled with the agent.

Every version is signed by the offline campaign key (benchhub_protocol.campaign_versions); the agent
bundles the public keys it trusts. A server manifest's signature over its digest is checked first,
before anything of it is used or asked about (exit 16): a server cannot change one signed field.
Then it is checked field by field (manifest.py), and each patch is downloaded from its URL and
checked against the signed sha256. A bundled version's patch files are checked against its signed sha256 too. A version
whose variants do not all pin a commit is a draft: nothing of it is built (require_pinned). Code that
is signed but not bundled is still shown and asked about (trust.py).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from benchhub_protocol import campaign_versions
from benchhub_protocol.words import DEFAULT_MIN_EFFECT

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
    min_effect: float = DEFAULT_MIN_EFFECT  # the smallest effect worth reporting: verdicts and the sweep's target
    version: int = 0  # the campaign version (0: none known)
    digest: str = ""  # its digest, sent as the payload's campaign_digest; empty for a draft
    manifest: dict[str, Any] = field(default_factory=dict)  # the signed manifest, to say what a newer one changed

    def variant(self, name: str) -> Variant:
        for variant in self.variants:
            if variant.name == name:
                return variant
        raise AgentError(ExitCode.CAMPAIGN, f"Campaign {self.slug} has no variant {name!r}.")


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _bundled_data() -> Path:
    return Path(str(resources.files("benchhub_agent") / "data"))


def bundled_manifest(slug: str) -> dict[str, Any] | None:
    """The newest version of the campaign bundled with this agent, or None."""
    found = campaign_versions.bundled_versions().get(slug)
    return found[-1] if found else None


def bundled(slug: str) -> Campaign:
    definition = bundled_manifest(slug)
    if definition is None:
        raise AgentError(ExitCode.CAMPAIGN, f"No campaign {slug!r} is bundled with this agent and no server gave one.")
    if definition.get("signature") and _signed_by(definition) is None:
        raise AgentError(
            ExitCode.SIGNATURE,
            f"The bundled version {definition['version']} of campaign {slug} is not signed by a campaign key "
            "this agent trusts: reinstall benchhub-agent.",
        )
    patch_dir = _bundled_data() / "patches"
    variants = []
    for entry in definition["variants"]:
        patches = []
        for patch in entry["patches"]:
            patch_path = patch_dir / patch["name"]
            if not patch_path.is_file() or _sha256(patch_path.read_bytes()) != patch["sha256"]:
                raise AgentError(
                    ExitCode.CAMPAIGN, f"The bundled patch {patch['name']} of campaign {slug} is missing or altered."
                )
            patches.append(Patch(patch["name"], patch["sha256"], patch_path))
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
        float(definition.get("min_effect", DEFAULT_MIN_EFFECT)),
        int(definition["version"]),
        campaign_versions.digest(definition) if definition.get("signature") else "",
        campaign_versions.signed_body(definition),
    )


def _signed_by(manifest: dict[str, Any]) -> str | None:
    return campaign_versions.verify(manifest, campaign_versions.trusted_keys())


def require_pinned(plan: Campaign) -> None:
    """The agent never builds an unpinned ref, nor a draft: a variant without a commit, or a version
    without a signature, runs nothing."""
    for variant in plan.variants:
        if not variant.commit:
            follows = f" (it follows {variant.ref})" if variant.ref else ""
            raise AgentError(
                ExitCode.CAMPAIGN,
                f"Variant {variant.name} of campaign {plan.slug} names no commit{follows}: version {plan.version} "
                "is a draft, and runs once a moderator pins it in a signed version.",
            )
    if not plan.digest:
        raise AgentError(
            ExitCode.CAMPAIGN,
            f"Version {plan.version} of campaign {plan.slug} is a draft (not signed): it runs once a moderator "
            "publishes it signed.",
        )


def newer_version_note(plan: Campaign) -> str | None:
    """What to tell a contributor whose agent bundles an older version than the one the server serves."""
    shipped = bundled_manifest(plan.slug)
    if shipped is None or plan.source != "server" or plan.version <= int(shipped["version"]):
        return None
    changed = campaign_versions.changes(campaign_versions.signed_body(shipped), plan.manifest)
    return (
        f"Campaign {plan.slug} version {plan.version} is open; this agent bundles version {shipped['version']}. "
        f"What changed: {'; '.join(changed) or 'nothing it measures'}."
    )


def from_manifest(manifest: dict[str, Any], dirs: Dirs, slug: str | None = None, server: str = "") -> Campaign:
    """A server manifest, every field checked before use, with each patch downloaded once into the cache
    and verified against its sha256."""
    slug = slug or str(manifest.get("slug"))
    if manifest.get("state") == "draft" and manifest.get("signature") is None and manifest.get("slug") == slug:
        raise AgentError(
            ExitCode.CAMPAIGN,
            f"Campaign {slug} has no open version yet (version {str(manifest.get('version'))[:8]} is a draft): "
            "nothing of it runs until a moderator publishes a signed one.",
        )
    # The signature first: a field a server changed is refused as such (exit 16) whatever its value;
    # the field checks then hold a signed manifest to the same rules (a stolen campaign key).
    if _signed_by(manifest) is None:
        raise AgentError(
            ExitCode.SIGNATURE,
            f"The server's manifest for campaign {slug} is not signed by a campaign key this agent trusts "
            "(a field was changed, or the signature is missing): refused before anything of it was used.",
        )
    manifest_rules.validate(manifest, slug, client.is_loopback(urlsplit(server).hostname))
    version = int(manifest["version"])
    shipped = bundled_manifest(slug)
    if shipped is not None and shipped.get("signature") and version < int(shipped["version"]):
        raise AgentError(
            ExitCode.CAMPAIGN,
            f"The server serves version {version} of campaign {slug}, older than the version {shipped['version']} "
            "this agent bundles: refused.",
        )
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
        min_effect = DEFAULT_MIN_EFFECT  # absent or nonsensical: the protocol's default, as the service's
    return Campaign(
        slug,
        manifest["repo"],
        manifest["baseline"],
        tuple(variants),
        sweep,
        "server",
        float(min_effect),
        version,
        campaign_versions.digest(manifest),
        campaign_versions.signed_body(manifest),
    )


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
