from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest

from benchhub.accounts.models import Contributor, ModerationEvent, PublicKey
from benchhub.results import moderation
from benchhub.results.admin import ReadOnlyAdmin


@admin.register(Contributor)
class ContributorAdmin(admin.ModelAdmin):
    list_display = ("handle", "is_demo", "created_at")
    search_fields = ("handle",)
    readonly_fields = ("handle", "created_at")


@admin.register(PublicKey)
class PublicKeyAdmin(admin.ModelAdmin):
    list_display = ("keyid", "contributor", "banned", "created_at")
    list_filter = ("banned",)
    search_fields = ("keyid", "contributor__handle")
    actions = ("ban", "unban")

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False  # bans go through the audited actions below

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    @admin.action(description="Ban the selected keys (their later submissions get 403)")
    def ban(self, request: HttpRequest, queryset: QuerySet[PublicKey]) -> None:
        count = moderation.set_banned(queryset, True, request.user, "banned from the admin")
        self.message_user(request, f"Banned {count} key(s).", messages.SUCCESS)

    @admin.action(description="Unban the selected keys")
    def unban(self, request: HttpRequest, queryset: QuerySet[PublicKey]) -> None:
        count = moderation.set_banned(queryset, False, request.user, "unbanned from the admin")
        self.message_user(request, f"Unbanned {count} key(s).", messages.SUCCESS)


@admin.register(ModerationEvent)
class ModerationEventAdmin(ReadOnlyAdmin):
    list_display = ("created_at", "actor_name", "action", "target", "reason")
    list_filter = ("action",)
