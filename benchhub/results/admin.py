from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest

from benchhub.readonly_admin import ReadOnlyAdmin
from benchhub.results import claims, moderation
from benchhub.results.models import Campaign, LeaderboardCell, ModelClaimDecision, ModelFile, RawEnvelope, Submission


@admin.register(Submission)
class SubmissionAdmin(ReadOnlyAdmin):
    list_display = (
        "id",
        "campaign",
        "contributor",
        "machine",
        "model_file",
        "status",
        "hidden",
        "is_demo",
        "received_at",
    )
    list_filter = ("campaign", "status", "hidden", "released", "is_demo")
    search_fields = ("id", "contributor__handle", "key__keyid", "machine__chip", "model_sha256")
    actions = ("hide", "unhide", "release", "hold")

    @admin.action(description="Hide the selected submissions (they leave the leaderboard)")
    def hide(self, request: HttpRequest, queryset: QuerySet[Submission]) -> None:
        count = moderation.set_hidden(queryset, True, request.user, "hidden from the admin")
        self.message_user(request, f"Hid {count} submission(s).", messages.SUCCESS)

    @admin.action(description="Unhide the selected submissions")
    def unhide(self, request: HttpRequest, queryset: QuerySet[Submission]) -> None:
        count = moderation.set_hidden(queryset, False, request.user, "unhidden from the admin")
        self.message_user(request, f"Unhid {count} submission(s).", messages.SUCCESS)

    @admin.action(description="Release the selected quarantined or model-conflict submissions into the cells")
    def release(self, request: HttpRequest, queryset: QuerySet[Submission]) -> None:
        count = moderation.set_released(queryset, True, request.user, "released from the admin")
        self.message_user(request, f"Released {count} submission(s).", messages.SUCCESS)

    @admin.action(description="Hold the selected released submissions back again")
    def hold(self, request: HttpRequest, queryset: QuerySet[Submission]) -> None:
        count = moderation.set_released(queryset, False, request.user, "held back from the admin")
        self.message_user(request, f"Held back {count} submission(s).", messages.SUCCESS)


@admin.register(Campaign)
class CampaignAdmin(ReadOnlyAdmin):
    list_display = ("slug", "title", "baseline", "updated_at")


@admin.register(RawEnvelope)
class RawEnvelopeAdmin(ReadOnlyAdmin):
    list_display = ("submission", "sha256", "received_at")


@admin.register(LeaderboardCell)
class LeaderboardCellAdmin(ReadOnlyAdmin):
    list_display = ("campaign", "chip", "gpu_cores", "model", "variant", "batch_size", "speedup", "n_machines")
    list_filter = ("campaign", "quant", "variant")


class DisputedFilter(admin.SimpleListFilter):
    title = "dispute"
    parameter_name = "disputed"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [("yes", "files whose claims disagree")]

    def queryset(self, request: HttpRequest, queryset: QuerySet[ModelFile]) -> QuerySet[ModelFile]:
        return queryset.filter(sha256__in=claims.disputed_files()) if self.value() == "yes" else queryset


@admin.register(ModelFile)
class ModelClaimAdmin(ReadOnlyAdmin):
    """Every claim about a model file, by sha256: its standing (docs/protocol.md, model identity),
    the machines and established networks behind it, and how many of its submissions are held."""

    list_display = (
        "sha256",
        "file_type",
        "size_bytes",
        "architecture",
        "label",
        "standing",
        "machines",
        "networks",
        "held",
    )
    list_filter = (DisputedFilter,)
    search_fields = ("sha256", "file_name", "label")
    ordering = ("sha256", "file_type")
    actions = ("pin_claim", "unpin_claim")

    def changelist_view(self, request: HttpRequest, extra_context: dict[str, Any] | None = None) -> Any:
        self._standings: dict[str, claims.Standing] = {}
        return super().changelist_view(request, extra_context)

    def _standing(self, claim: ModelFile) -> claims.Standing:
        cache = getattr(self, "_standings", {})
        if claim.sha256 not in cache:
            cache[claim.sha256] = claims.standing(claim.sha256)
        return cache[claim.sha256]

    def _claim(self, claim: ModelFile) -> claims.Claim:
        return self._standing(claim).claims.get(claim.facts_digest) or claims.Claim(claim.facts_digest)

    @admin.display(description="standing")
    def standing(self, claim: ModelFile) -> str:
        found = self._standing(claim)
        if found.established == claim.facts_digest:
            return "pinned" if found.pinned else ("stands, disputed" if found.disputed else "stands")
        if not found.disputed:
            return "undisputed, no established machine yet"
        return "held" if found.established else "waiting: no claim has standing"

    @admin.display(description="machines")
    def machines(self, claim: ModelFile) -> int:
        return len(self._claim(claim).keys)

    @admin.display(description="established networks")
    def networks(self, claim: ModelFile) -> str:
        found = self._claim(claim)
        return f"{found.weight}: {', '.join(sorted(found.networks))}" if found.networks else "0"

    @admin.display(description="held")
    def held(self, claim: ModelFile) -> int:
        return Submission.objects.filter(model_sha256=claim.sha256, model_held=True, model_file=claim).count()

    @admin.action(description="Pin this claim: it stands for its file, whatever the machines behind the others")
    def pin_claim(self, request: HttpRequest, queryset: QuerySet[ModelFile]) -> None:
        if len({claim.sha256 for claim in queryset}) != queryset.count():
            self.message_user(request, "Choose one claim per file.", messages.ERROR)
            return
        for claim in queryset:
            moderation.pin_claim(claim, request.user, "pinned in the admin")
        self.message_user(request, f"Pinned {queryset.count()} file(s); their pages are being refreshed.")

    @admin.action(description="Unpin the selected files: their claims' standing decides again")
    def unpin_claim(self, request: HttpRequest, queryset: QuerySet[ModelFile]) -> None:
        count = sum(
            moderation.unpin_claim(sha256, request.user, "unpinned in the admin")
            for sha256 in {claim.sha256 for claim in queryset}
        )
        self.message_user(request, f"Unpinned {count} file(s).")


@admin.register(ModelClaimDecision)
class ModelClaimDecisionAdmin(ReadOnlyAdmin):
    list_display = ("sha256", "claim", "name", "decided_by", "decided_at", "reason")
