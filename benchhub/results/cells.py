"""Recompute leaderboard cells from Measurement rows. Every function is idempotent: running one
twice, or after a crash, gives the same cells.

All cells a submission touches share its campaign, chip, GPU core count and quant (one machine,
one model): a "group". A refresh reads the group's rows in one indexed query and writes its cells
in one statement per kind of change, instead of a query pair per cell.
"""

from __future__ import annotations

import hashlib
from collections import defaultdict
from dataclasses import dataclass

from django.db import connection, transaction
from django.utils import timezone

from benchhub.results import stats
from benchhub.results.models import LeaderboardCell, Measurement, Submission

# (variant, batch size) within a group
CellName = tuple[str, int]
ROW_FIELDS = ("variant_name", "batch_size", "tg_tps", "baseline_tg_tps", "speedup", "contributor_id", "excluded_reason")
VALUE_FIELDS = (
    "tg_tps",
    "baseline_tg_tps",
    "speedup",
    "ci_low",
    "ci_high",
    "n_submissions",
    "n_contributors",
    "n_excluded_correctness",
    "n_excluded_degenerate",
)


@dataclass(frozen=True)
class Group:
    campaign_id: int
    chip: str
    gpu_cores: int | None
    quant: str

    def sort_key(self) -> tuple[int, str, int, str]:
        return (self.campaign_id, self.chip, -1 if self.gpu_cores is None else self.gpu_cores, self.quant)

    def lock_id(self) -> int:
        digest = hashlib.sha256(repr(self).encode()).digest()
        return int.from_bytes(digest[:8], "big", signed=True)

    def filter(self) -> dict[str, object]:
        return {"campaign_id": self.campaign_id, "chip": self.chip, "gpu_cores": self.gpu_cores, "quant": self.quant}


def _lock(group: Group) -> None:
    """Serialise refreshes of one group, so a slow refresh can never overwrite a newer one with an
    older snapshot; taken before reading, so the read sees every committed measurement."""
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(%s)", [group.lock_id()])


def _values(rows: list[tuple[float, float | None, float | None, int, str]]) -> dict[str, object]:
    included = [
        stats.PairedSample(tg, baseline, speedup, contributor)
        for tg, baseline, speedup, contributor, excluded in rows
        if not excluded and speedup is not None and baseline is not None
    ]
    aggregate = stats.aggregate(included)
    return {
        "tg_tps": aggregate.tg_tps if aggregate else None,
        "baseline_tg_tps": aggregate.baseline_tg_tps if aggregate else None,
        "speedup": aggregate.speedup if aggregate else None,
        "ci_low": aggregate.ci_low if aggregate else None,
        "ci_high": aggregate.ci_high if aggregate else None,
        "n_submissions": aggregate.n_submissions if aggregate else 0,
        "n_contributors": aggregate.n_contributors if aggregate else 0,
        "n_excluded_correctness": sum(row[4] == Measurement.Excluded.CORRECTNESS_FAILED for row in rows),
        "n_excluded_degenerate": sum(row[4] == Measurement.Excluded.DEGENERATE_OUTPUT for row in rows),
    }


@transaction.atomic
def refresh_group(group: Group, only: set[CellName] | None = None) -> int:
    """Recompute the group's cells named in `only` (all of them when None); returns how many."""
    _lock(group)
    measurements = Measurement.objects.filter(**group.filter()).exclude(excluded_reason=Measurement.Excluded.HIDDEN)
    cells = LeaderboardCell.objects.filter(**group.filter())
    if only is not None:
        variants, sizes = {name for name, _ in only}, {size for _, size in only}
        measurements = measurements.filter(variant_name__in=variants, batch_size__in=sizes)
        cells = cells.filter(variant__in=variants, batch_size__in=sizes)
    rows: dict[CellName, list[tuple[float, float | None, float | None, int, str]]] = defaultdict(list)
    for variant, size, *values in measurements.values_list(*ROW_FIELDS):
        rows[(variant, size)].append(tuple(values))
    wanted = set(rows) if only is None else only
    existing = {(cell.variant, cell.batch_size): cell for cell in cells}
    now = timezone.now()
    changed, created = [], []
    for name in wanted:
        if name not in rows:
            continue
        values = _values(rows[name])
        cell = existing.get(name)
        if cell is None:
            cell = LeaderboardCell(**group.filter(), variant=name[0], batch_size=name[1])
            created.append(cell)
        else:
            changed.append(cell)
        for field, value in values.items():
            setattr(cell, field, value)
        cell.updated_at = now
    gone = [cell.pk for name, cell in existing.items() if name in wanted and name not in rows]
    if only is None:
        gone += [cell.pk for name, cell in existing.items() if name not in rows]
    LeaderboardCell.objects.filter(pk__in=gone).delete()
    for cell in changed:
        # One small UPDATE each: bulk_update's CASE expressions cost ~200 ms of Python per 27 cells.
        cell.save(update_fields=[*VALUE_FIELDS, "updated_at"])
    LeaderboardCell.objects.bulk_create(created)
    return len(wanted)


def refresh_submission_cells(submission_id: str) -> int:
    """Refresh every cell the submission touches, then mark it refreshed. Returns the cell count."""
    submission = Submission.objects.filter(pk=submission_id).first()
    if submission is None:
        return 0
    by_group: dict[Group, set[CellName]] = defaultdict(set)
    for campaign, chip, cores, quant, variant, size in submission.measurements.values_list(
        "campaign_id", "chip", "gpu_cores", "quant", "variant_name", "batch_size"
    ):
        by_group[Group(campaign, chip, cores, quant)].add((variant, size))
    count = sum(refresh_group(group, names) for group, names in sorted(by_group.items(), key=lambda g: g[0].sort_key()))
    Submission.objects.filter(pk=submission_id).update(cells_refreshed_at=timezone.now())
    return count


def refresh_all_cells() -> int:
    """Recompute every cell that has measurements and drop cells that have none, one group at a
    time (memory bounded by the largest group, not by the table)."""
    groups = {
        Group(*values)
        for values in Measurement.objects.values_list("campaign_id", "chip", "gpu_cores", "quant").distinct()
    }
    count = sum(refresh_group(group) for group in sorted(groups, key=Group.sort_key))
    for values in LeaderboardCell.objects.values_list("campaign_id", "chip", "gpu_cores", "quant").distinct():
        if Group(*values) not in groups:
            LeaderboardCell.objects.filter(**Group(*values).filter()).delete()
    return count
