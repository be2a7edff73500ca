from __future__ import annotations

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest

from benchhub.readonly_admin import ReadOnlyAdmin
from benchhub.results import moderation
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


@admin.register(ModelFile)
class ModelClaimAdmin(ReadOnlyAdmin):
    """Every claim about a model file, listed by sha256 with the machines (keys) behind it."""

    list_display = ("sha256", "file_type", "size_bytes", "architecture", "label", "machines", "submissions")
    search_fields = ("sha256", "file_name", "label")
    ordering = ("sha256", "file_type")
    actions = ("accept_claim",)

    @admin.display(description="machines")
    def machines(self, claim: ModelFile) -> int:
        return claim.submissions.filter(withdrawn_at__isnull=True).values("key").distinct().count()

    @admin.display(description="submissions")
    def submissions(self, claim: ModelFile) -> int:
        return claim.submissions.count()

    @admin.action(description="Accept this claim as the file's truth (the others stay held)")
    def accept_claim(self, request: HttpRequest, queryset: QuerySet[ModelFile]) -> None:
        if len({claim.sha256 for claim in queryset}) != queryset.count():
            self.message_user(request, "Choose one claim per file.", messages.ERROR)
            return
        for claim in queryset:
            moderation.decide_claim(claim, request.user, "accepted in the admin")
        self.message_user(request, f"Decided {queryset.count()} file(s); their pages are being refreshed.")


@admin.register(ModelClaimDecision)
class ModelClaimDecisionAdmin(ReadOnlyAdmin):
    list_display = ("sha256", "claim", "decided_by", "decided_at", "reason")
