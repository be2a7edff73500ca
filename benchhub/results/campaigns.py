"""What a campaign version's manifest says, read for the service: its variants with their patch files
(from settings.PATCHES_DIR, each checked against the sha256 the version signed, so a variant whose
patch is missing, empty or other is unavailable rather than served), and its rules. The versions
themselves live in versions.py."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from benchhub_protocol import words
from django.conf import settings


def sync_campaigns(campaign_model: Any, version_model: Any = None) -> int:
    """The bundled campaign versions into the database (versions.sync); returns how many campaigns."""
    from benchhub.results import versions

    return versions.sync(campaign_model, version_model)


@dataclass(frozen=True)
class PatchFile:
    name: str
    sha256: str | None  # None when the file is missing or empty
    problem: str

    @property
    def path(self) -> Path:
        return patch_path(self.name)


def patch_path(name: str) -> Path:
    return Path(settings.PATCHES_DIR) / name


def patch_file(name: str, signed_sha256: str) -> PatchFile:
    """Read the file on every call: patches land while the service runs, and they are small."""
    if "/" in name or "\\" in name or name.startswith("."):
        return PatchFile(name, None, f"{name} is not a plain file name")
    path = patch_path(name)
    if not path.is_file():
        return PatchFile(name, None, f"patch file {name} is not published yet")
    data = path.read_bytes()
    if not data.strip():
        return PatchFile(name, None, f"patch file {name} is empty")
    found = hashlib.sha256(data).hexdigest()
    if found != signed_sha256:
        return PatchFile(
            name, None, f"patch file {name} has sha256 {found}, not the {signed_sha256} its version signed"
        )
    return PatchFile(name, found, "")


@dataclass(frozen=True)
class ResolvedVariant:
    name: str
    commit: str | None
    ref: str | None
    patches: tuple[PatchFile, ...]
    env: dict[str, str]

    @property
    def available(self) -> bool:
        return all(patch.sha256 for patch in self.patches)

    @property
    def unavailable_reason(self) -> str:
        return "; ".join(patch.problem for patch in self.patches if patch.problem)


def resolved_variants(definition: dict[str, Any]) -> list[ResolvedVariant]:
    return [
        ResolvedVariant(
            name=variant["name"],
            commit=variant.get("commit"),
            ref=variant.get("ref"),
            patches=tuple(patch_file(patch["name"], patch["sha256"]) for patch in variant.get("patches", [])),
            env=dict(variant.get("env", {})),
        )
        for variant in definition["variants"]
    ]


def campaign_patch_names(definition: dict[str, Any]) -> set[str]:
    return {patch["name"] for variant in definition["variants"] for patch in variant.get("patches", [])}


@dataclass(frozen=True)
class CampaignRules:
    """What a campaign's manifest says about judging its results (docs/protocol.md, cells)."""

    min_effect: float  # the smallest change worth reporting, as a fraction
    plausible_ratio: tuple[float, float]  # a variant/baseline ratio outside it waits for a moderator
    patched_backends: frozenset[str]  # rows of other backends are controls (identical code)
    opened_at: datetime | None  # a result assembled before it is refused


DEFAULT_PLAUSIBLE_RATIO = (1 / 3, 3.0)


def campaign_rules(definition: dict[str, Any]) -> CampaignRules:
    low, high = definition.get("plausible_ratio") or DEFAULT_PLAUSIBLE_RATIO
    opened = definition.get("opened_at")
    return CampaignRules(
        min_effect=float(definition.get("min_effect", words.DEFAULT_MIN_EFFECT)),
        plausible_ratio=(float(low), float(high)),
        patched_backends=frozenset(definition.get("patched_backends", ("metal",))),
        opened_at=datetime.fromisoformat(opened) if opened else None,
    )


def headline_sizes(definition: dict[str, Any]) -> list[int]:
    return words.headline_sizes(definition["sweep"]["batch_sizes"])


BACKEND_NAMES = {"metal": "Metal", "cpu": "CPU", "cuda": "CUDA", "vulkan": "Vulkan"}


def variant_descriptions(definition: dict[str, Any]) -> dict[str, str]:
    """Each variant's one-line explanation, as the campaign definition gives it."""
    return {variant["name"]: variant.get("description", "") for variant in definition.get("variants", [])}


def backend_name(backend: str) -> str:
    return BACKEND_NAMES.get(backend.lower(), backend)
