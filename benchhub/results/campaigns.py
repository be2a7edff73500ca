"""Campaign rows come from the definition JSONs of the shared package (benchhub_protocol/campaigns/);
patch hashes come from the files in settings.PATCHES_DIR, so a variant whose patch is missing or empty is unavailable
rather than published with a placeholder hash."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from datetime import datetime
from importlib import resources
from pathlib import Path
from typing import Any

from django.conf import settings


def definitions() -> list[dict[str, Any]]:
    folder = resources.files("benchhub_protocol").joinpath("campaigns")
    return [
        json.loads(entry.read_text(encoding="utf-8"))
        for entry in sorted(folder.iterdir(), key=lambda item: item.name)
        if entry.name.endswith(".json")
    ]


def sync_campaigns(campaign_model: Any) -> int:
    """Create or update one row per definition; takes the model so a data migration can pass its
    historical model. Idempotent. Returns how many definitions were synced."""
    synced = 0
    for definition in definitions():
        campaign_model.objects.update_or_create(
            slug=definition["slug"],
            defaults={
                "title": definition["title"],
                "description": definition.get("description", ""),
                "repo": definition["repo"],
                "baseline": definition["baseline"],
                "definition": definition,
            },
        )
        synced += 1
    return synced


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


def patch_file(name: str) -> PatchFile:
    """Read the file on every call: patches land while the service runs, and they are small."""
    if "/" in name or "\\" in name or name.startswith("."):
        return PatchFile(name, None, f"{name} is not a plain file name")
    path = patch_path(name)
    if not path.is_file():
        return PatchFile(name, None, f"patch file {name} is not published yet")
    data = path.read_bytes()
    if not data.strip():
        return PatchFile(name, None, f"patch file {name} is empty")
    return PatchFile(name, hashlib.sha256(data).hexdigest(), "")


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
            patches=tuple(patch_file(name) for name in variant.get("patches", [])),
            env=dict(variant.get("env", {})),
        )
        for variant in definition["variants"]
    ]


def campaign_patch_names(definition: dict[str, Any]) -> set[str]:
    return {name for variant in definition["variants"] for name in variant.get("patches", [])}


@dataclass(frozen=True)
class CampaignRules:
    """What a campaign's manifest says about judging its results (docs/protocol.md, cells)."""

    min_effect: float  # the smallest change worth reporting, as a fraction
    plausible_ratio: tuple[float, float]  # a variant/baseline ratio outside it waits for a moderator
    patched_backends: frozenset[str]  # rows of other backends are controls (identical code)
    opened_at: datetime | None  # a result assembled before it is refused


DEFAULT_MIN_EFFECT = 0.02
DEFAULT_PLAUSIBLE_RATIO = (1 / 3, 3.0)
# Where a verify step of speculative decoding falls (docs/campaigns.md): the headline's batch sizes.
HEADLINE_BATCHES = (2, 8)


def campaign_rules(definition: dict[str, Any]) -> CampaignRules:
    low, high = definition.get("plausible_ratio") or DEFAULT_PLAUSIBLE_RATIO
    opened = definition.get("opened_at")
    return CampaignRules(
        min_effect=float(definition.get("min_effect", DEFAULT_MIN_EFFECT)),
        plausible_ratio=(float(low), float(high)),
        patched_backends=frozenset(definition.get("patched_backends", ("metal",))),
        opened_at=datetime.fromisoformat(opened) if opened else None,
    )


def headline_sizes(definition: dict[str, Any]) -> list[int]:
    low, high = HEADLINE_BATCHES
    return sorted(size for size in definition["sweep"]["batch_sizes"] if low <= size <= high)


BACKEND_NAMES = {"metal": "Metal", "cpu": "CPU", "cuda": "CUDA", "vulkan": "Vulkan"}


def variant_descriptions(definition: dict[str, Any]) -> dict[str, str]:
    """Each variant's one-line explanation, as the campaign definition gives it."""
    return {variant["name"]: variant.get("description", "") for variant in definition.get("variants", [])}


def backend_name(backend: str) -> str:
    return BACKEND_NAMES.get(backend.lower(), backend)
