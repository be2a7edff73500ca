"""Recompute leaderboard cells from Measurement rows. Every function is idempotent: running one
twice, or after a crash, gives the same cells."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from django.db import connection, transaction
from django.db.models import QuerySet
from django.utils import timezone

from benchhub.results import stats
from benchhub.results.models import LeaderboardCell, Measurement, Submission


@dataclass(frozen=True)
class CellKey:
    campaign_id: int
    chip: str
    gpu_cores: int | None
    quant: str
    variant: str
    batch_size: int

    def sort_key(self) -> tuple[int, str, int, str, str, int]:
        return (
            self.campaign_id,
            self.chip,
            -1 if self.gpu_cores is None else self.gpu_cores,
            self.quant,
            self.variant,
            self.batch_size,
        )

    def lock_id(self) -> int:
        digest = hashlib.sha256(repr(self).encode()).digest()
        return int.from_bytes(digest[:8], "big", signed=True)


KEY_FIELDS = ("campaign_id", "chip", "gpu_cores", "quant", "variant_name", "batch_size")


def keys_of(measurements: QuerySet[Measurement]) -> set[CellKey]:
    return {CellKey(*values) for values in measurements.values_list(*KEY_FIELDS).distinct()}


def _lock(key: CellKey) -> None:
    """Serialise refreshes of one cell, so a slow refresh can never overwrite a newer one with an
    older snapshot; taken before reading, so the read sees every committed measurement."""
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(%s)", [key.lock_id()])


@transaction.atomic
def refresh_cell(key: CellKey) -> LeaderboardCell | None:
    _lock(key)
    rows = list(
        Measurement.objects.filter(
            campaign_id=key.campaign_id,
            chip=key.chip,
            gpu_cores=key.gpu_cores,
            quant=key.quant,
            variant_name=key.variant,
            batch_size=key.batch_size,
        ).exclude(excluded_reason=Measurement.Excluded.HIDDEN)
    )
    cell_filter = LeaderboardCell.objects.filter(
        campaign_id=key.campaign_id,
        chip=key.chip,
        gpu_cores=key.gpu_cores,
        quant=key.quant,
        variant=key.variant,
        batch_size=key.batch_size,
    )
    if not rows:
        cell_filter.delete()
        return None
    included = [
        stats.PairedSample(m.tg_tps, m.baseline_tg_tps, m.speedup, m.contributor_id)
        for m in rows
        if not m.excluded_reason and m.speedup is not None and m.baseline_tg_tps is not None
    ]
    aggregate = stats.aggregate(included)
    values = {
        "tg_tps": aggregate.tg_tps if aggregate else None,
        "baseline_tg_tps": aggregate.baseline_tg_tps if aggregate else None,
        "speedup": aggregate.speedup if aggregate else None,
        "ci_low": aggregate.ci_low if aggregate else None,
        "ci_high": aggregate.ci_high if aggregate else None,
        "n_submissions": aggregate.n_submissions if aggregate else 0,
        "n_contributors": aggregate.n_contributors if aggregate else 0,
        "n_excluded_correctness": sum(m.excluded_reason == Measurement.Excluded.CORRECTNESS_FAILED for m in rows),
        "n_excluded_degenerate": sum(m.excluded_reason == Measurement.Excluded.DEGENERATE_OUTPUT for m in rows),
    }
    cell = cell_filter.first()
    if cell is None:
        return LeaderboardCell.objects.create(
            campaign_id=key.campaign_id,
            chip=key.chip,
            gpu_cores=key.gpu_cores,
            quant=key.quant,
            variant=key.variant,
            batch_size=key.batch_size,
            **values,
        )
    for name, value in values.items():
        setattr(cell, name, value)
    cell.save()
    return cell


def refresh_submission_cells(submission_id: str) -> int:
    """Refresh every cell the submission touches, then mark it refreshed. Returns the cell count."""
    submission = Submission.objects.filter(pk=submission_id).first()
    if submission is None:
        return 0
    keys = keys_of(submission.measurements.all())
    for key in sorted(keys, key=CellKey.sort_key):
        refresh_cell(key)
    Submission.objects.filter(pk=submission_id).update(cells_refreshed_at=timezone.now())
    return len(keys)


def refresh_all_cells() -> int:
    """Recompute every cell that has measurements and drop cells that have none."""
    keys = keys_of(Measurement.objects.all())
    for key in sorted(keys, key=CellKey.sort_key):
        refresh_cell(key)
    cell_keys = LeaderboardCell.objects.values_list(
        "pk", "campaign_id", "chip", "gpu_cores", "quant", "variant", "batch_size"
    )
    stale = [
        pk
        for pk, campaign, chip, cores, quant, variant, size in cell_keys
        if CellKey(campaign, chip, cores, quant, variant, size) not in keys
    ]
    LeaderboardCell.objects.filter(pk__in=stale).delete()
    return len(keys)
