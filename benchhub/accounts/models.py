"""Contributors, their signing keys and the moderators' audit trail."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import models
from django.db.models.functions import Lower


class Contributor(models.Model):
    """A public identity. Handles compare case-insensitively but keep the spelling first registered."""

    handle = models.CharField(max_length=39)
    # Unique: no handle may read as another (names.handle_key: case folding and TR39 skeletons).
    # Null only for rows older than the rule that collided with an earlier one.
    handle_key = models.CharField(max_length=200, null=True, unique=True, editable=False)
    is_demo = models.BooleanField(default=False, help_text="Made by seed_demo; never a real measurement.")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = (models.UniqueConstraint(Lower("handle"), name="contributor_handle_ci_unique"),)
        ordering = ("handle",)

    def __str__(self) -> str:
        return self.handle

    def save(self, *args: Any, **kwargs: Any) -> None:
        if self._state.adding and self.handle_key is None:
            from benchhub.accounts.names import handle_key  # names reads these models

            self.handle_key = handle_key(self.handle)
        super().save(*args, **kwargs)


class PublicKeyQuerySet(models.QuerySet["PublicKey"]):
    def usable(self) -> PublicKeyQuerySet:
        return self.filter(banned=False)


class PublicKey(models.Model):
    """An Ed25519 key; one per contributor machine. `keyid` is the hex SHA-256 of the raw key."""

    keyid = models.CharField(max_length=64, unique=True)
    public_key = models.BinaryField(max_length=32)
    contributor = models.ForeignKey(Contributor, on_delete=models.PROTECT, related_name="keys")
    banned = models.BooleanField(default=False, help_text="Later submissions signed by a banned key get 403.")
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    # The network it registered from (IPv4 /24, IPv6 /64), never the address: what a moderator
    # retires keys by (moderation.retire_keys); blank for keys older than the rule.
    registered_network = models.CharField(max_length=43, blank=True, default="", db_index=True)

    objects = PublicKeyQuerySet.as_manager()

    class Meta:
        ordering = ("created_at",)

    def __str__(self) -> str:
        return f"{self.keyid[:16]}… ({self.contributor.handle})"


class ModerationEvent(models.Model):
    """Append-only: who did what to which submission or key, when, and why."""

    class Action(models.TextChoices):
        HIDE_SUBMISSION = "hide_submission", "hide submission"
        UNHIDE_SUBMISSION = "unhide_submission", "unhide submission"
        RELEASE_SUBMISSION = "release_submission", "release submission"
        HOLD_SUBMISSION = "hold_submission", "hold submission"
        WITHDRAW_SUBMISSION = "withdraw_submission", "withdrawn by its contributor"
        BAN_KEY = "ban_key", "ban key"
        UNBAN_KEY = "unban_key", "unban key"
        RETIRE_KEY = "retire_key", "retire key (banned, its submissions hidden)"
        MARK_DEMO = "mark_demo", "mark contributor as demo"
        MARK_REAL = "mark_real", "mark contributor as real"
        DELETE_CONTRIBUTOR = "delete_contributor", "delete contributor"
        RELEASE_CHIP_NAME = "release_chip_name", "release a chip spelling's slug"
        DECIDE_MODEL_CLAIM = "decide_model_claim", "pin which claim about a model file stands"
        UNPIN_MODEL_CLAIM = "unpin_model_claim", "unpin a model file's claim"

    actor = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    actor_name = models.CharField(max_length=150, help_text="Kept even if the user account goes away.")
    action = models.CharField(max_length=32, choices=Action.choices)
    target = models.CharField(max_length=100, help_text="Submission id or keyid.")
    reason = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ("-created_at",)

    def __str__(self) -> str:
        return f"{self.actor_name} {self.action} {self.target}"


class ChipName(models.Model):
    """The one spelling of each chip slug (names.claim_chip): two names with one slug would share
    one /chips/<slug>/ page, so the first spelling seen owns the slug and others are refused."""

    slug = models.CharField(max_length=200, unique=True)
    name = models.CharField(max_length=200, unique=True)
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return self.name
