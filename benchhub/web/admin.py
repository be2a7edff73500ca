from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest

from benchhub.web.models import ReferenceRow


@admin.register(ReferenceRow)
class ReferenceRowAdmin(admin.ModelAdmin):
    """Published rows are loaded from their files (load_reference_rows), never edited by hand."""

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    list_display = (
        "campaign_slug",
        "machine_label",
        "model_label",
        "variant",
        "batch_size",
        "baseline_tg_tps",
        "tg_tps",
    )
    list_filter = ("campaign_slug", "chip", "quant")
    search_fields = ("machine_label", "model_label", "source")
