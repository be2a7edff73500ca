"""Campaigns and their immutable, signed versions (docs/campaigns.md)."""

from __future__ import annotations

from django.db import models


class Campaign(models.Model):
    """One A/B campaign; `definition` is a copy of its current version's manifest (CampaignVersion)."""

    slug = models.SlugField(max_length=64, unique=True)
    title = models.CharField(max_length=200)
    description = models.TextField(blank=True)
    repo = models.URLField(max_length=500)
    baseline = models.CharField(max_length=64)
    definition = models.JSONField()
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ("slug",)

    def __str__(self) -> str:
        return self.slug

    @property
    def variant_names(self) -> list[str]:
        return [variant["name"] for variant in self.definition["variants"]]


class CampaignVersion(models.Model):
    """One immutable version of a campaign (docs/protocol.md, campaign versions): its manifest, the
    digest over it and the offline campaign key's signature (empty for a draft). Campaign.definition
    is a copy of the current version's manifest."""

    class State(models.TextChoices):
        DRAFT = "draft"
        OPEN = "open"
        SUPERSEDED = "superseded"
        CLOSED = "closed"

    campaign = models.ForeignKey(Campaign, on_delete=models.CASCADE, related_name="versions")
    version = models.PositiveIntegerField()
    digest = models.CharField(max_length=64, unique=True)
    manifest = models.JSONField()
    signature = models.CharField(max_length=100, blank=True, help_text="base64 Ed25519 over the digest; empty: draft")
    state = models.CharField(max_length=16, choices=State.choices)
    measured_from = models.PositiveIntegerField(
        help_text="the earliest version since which nothing measured changed: the cells it shares"
    )
    changes = models.JSONField(default=list, help_text="what changed from the version before, one phrase each")
    published_at = models.DateTimeField(null=True, blank=True, help_text="when it opened; null for a draft")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ("campaign", "version")
        constraints = (models.UniqueConstraint(fields=["campaign", "version"], name="campaign_version_unique"),)

    def __str__(self) -> str:
        return f"{self.campaign_id} v{self.version} ({self.state})"
