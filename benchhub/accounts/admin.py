"""Keys and contributors: read-only lists whose every change is an audited action
(moderation.py): ban, unban, retire; mark demo or real; delete."""

from __future__ import annotations

from django.contrib import admin, messages
from django.db.models import ProtectedError, QuerySet
from django.http import HttpRequest

from benchhub.accounts import networks
from benchhub.accounts.models import ChipName, Contributor, ModerationEvent, PublicKey
from benchhub.readonly_admin import ReadOnlyAdmin
from benchhub.results import moderation


@admin.register(Contributor)
class ContributorAdmin(ReadOnlyAdmin):
    list_display = ("handle", "is_demo", "created_at")
    list_filter = ("is_demo",)
    search_fields = ("handle",)
    actions = ("mark_demo", "mark_real", "retire", "delete")

    @admin.action(description="Mark as demo data (their pages say: examples, not measurements)")
    def mark_demo(self, request: HttpRequest, queryset: QuerySet[Contributor]) -> None:
        count = moderation.set_demo(queryset, True, request.user, "marked demo from the admin")
        self.message_user(request, f"Marked {count} contributor(s) as demo.", messages.SUCCESS)

    @admin.action(description="Mark as real contributors")
    def mark_real(self, request: HttpRequest, queryset: QuerySet[Contributor]) -> None:
        count = moderation.set_demo(queryset, False, request.user, "marked real from the admin")
        self.message_user(request, f"Marked {count} contributor(s) as real.", messages.SUCCESS)

    @admin.action(description="Retire every key of the selected handles (banned; their submissions leave the cells)")
    def retire(self, request: HttpRequest, queryset: QuerySet[Contributor]) -> None:
        keys = PublicKey.objects.filter(contributor__in=queryset)
        retired, hidden = moderation.retire_keys(keys, request.user, "handle retired from the admin")
        self.message_user(request, f"Retired {retired} key(s); hid {hidden} submission(s).", messages.SUCCESS)

    @admin.action(description="Delete the selected contributors (only those with no key or submission)")
    def delete(self, request: HttpRequest, queryset: QuerySet[Contributor]) -> None:
        deleted = 0
        for contributor in queryset:
            try:
                moderation.delete_contributor(contributor, request.user, "deleted from the admin")
                deleted += 1
            except ProtectedError:
                self.message_user(
                    request, f"{contributor.handle} has keys or submissions: retire it instead.", messages.ERROR
                )
        self.message_user(request, f"Deleted {deleted} contributor(s).", messages.SUCCESS)


@admin.register(PublicKey)
class PublicKeyAdmin(ReadOnlyAdmin):
    list_display = ("keyid", "contributor", "banned", "registered_network", "created_at")
    list_filter = ("banned",)
    # A network's keys: search an address, a CIDR (203.0.113.0/24, 2001:db8::/48) or the leading
    # octets (203.0.113), narrow by date, select all, retire. Networks match as networks, never as
    # text: "10.1.1" finds 10.1.1.0/24, not 110.1.1.0/24.
    search_fields = ("keyid", "contributor__handle")
    date_hierarchy = "created_at"
    actions = ("ban", "unban", "retire")

    def get_search_results(
        self, request: HttpRequest, queryset: QuerySet[PublicKey], search_term: str
    ) -> tuple[QuerySet[PublicKey], bool]:
        wanted = networks.search_network(search_term)
        if wanted is None:
            return super().get_search_results(request, queryset, search_term)
        return queryset.filter(pk__in=networks.keys_inside(queryset, wanted)), False

    @admin.action(description="Ban the selected keys (their later submissions get 403)")
    def ban(self, request: HttpRequest, queryset: QuerySet[PublicKey]) -> None:
        count = moderation.set_banned(queryset, True, request.user, "banned from the admin")
        self.message_user(request, f"Banned {count} key(s).", messages.SUCCESS)

    @admin.action(description="Unban the selected keys")
    def unban(self, request: HttpRequest, queryset: QuerySet[PublicKey]) -> None:
        count = moderation.set_banned(queryset, False, request.user, "unbanned from the admin")
        self.message_user(request, f"Unbanned {count} key(s).", messages.SUCCESS)

    @admin.action(description="Retire the selected keys (banned; their submissions leave the cells)")
    def retire(self, request: HttpRequest, queryset: QuerySet[PublicKey]) -> None:
        retired, hidden = moderation.retire_keys(queryset, request.user, "retired from the admin")
        self.message_user(request, f"Retired {retired} key(s); hid {hidden} submission(s).", messages.SUCCESS)


@admin.register(ChipName)
class ChipNameAdmin(ReadOnlyAdmin):
    list_display = ("name", "slug", "created_at")
    search_fields = ("name", "slug")
    actions = ("release",)

    @admin.action(description="Release the slugs of spellings no visible submission uses (retire the squatter first)")
    def release(self, request: HttpRequest, queryset: QuerySet[ChipName]) -> None:
        count = moderation.release_chip_names(queryset, request.user, "released from the admin")
        self.message_user(request, f"Released {count} spelling(s); spellings still in use keep their slug.")


@admin.register(ModerationEvent)
class ModerationEventAdmin(ReadOnlyAdmin):
    list_display = ("created_at", "actor_name", "action", "target", "reason")
    list_filter = ("action",)
