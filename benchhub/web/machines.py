"""One definition of "machine" on every page (PROTOCOL.md 5.1): a machine is a registered key, and
a count of machines over several cells (a ranking line, a model file) is the number of distinct
keys whose rows count in any of them: the rows a cell takes in, by the rules of cells.py (not
excluded, the model claim not held, the key past probation). A cell's own n_machines is the
same count over one cell."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db.models import Count
from django.utils import timezone

from benchhub.results.models import Measurement

LINE_FIELDS = ("chip", "gpu_cores", "model_sha256", "backend", "commit")


def counted_machines(campaign_slug: str, fields: tuple[str, ...], **filters: Any) -> dict[tuple[Any, ...], int]:
    """Distinct counted keys per value of `fields` among the campaign's measurements."""
    rows = Measurement.objects.filter(
        campaign__slug=campaign_slug,
        excluded_reason="",
        submission__model_held=False,
        speedup__isnull=False,
        baseline_tg_tps__isnull=False,
        **filters,
    )
    probation = settings.BENCHHUB_KEY_PROBATION_S
    if probation > 0:
        rows = rows.filter(key__created_at__lte=timezone.now() - timedelta(seconds=probation))
    counted = rows.order_by().values(*fields).annotate(n=Count("key", distinct=True))
    return {tuple(row[name] for name in fields): row["n"] for row in counted}
