from __future__ import annotations

from django.contrib import admin

from benchhub.readonly_admin import ReadOnlyAdmin
from benchhub.results.published import ReferenceRow


@admin.register(ReferenceRow)
class ReferenceRowAdmin(ReadOnlyAdmin):
    """Published rows are loaded from their files (load_reference_rows), never edited by hand."""

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
