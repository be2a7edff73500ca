"""Leaderboard cells, recomputed a group at a time from the group's stored measurements.

All cells a submission touches share its campaign, chip, GPU core count and model file (one
machine, one model): a "group". A refresh, under the group's lock, reads every measurement of the
group, computes each cell with stats.py, replaces the group's cells and marks the submissions it
took in as refreshed. Idempotent: running it twice, or after a crash, gives the same cells.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Hashable
from dataclasses import asdict, dataclass
from typing import Any

from benchhub_protocol import stats
from django.db import transaction
from django.db.models import QuerySet
from django.utils import timezone

from benchhub.results.models import Campaign, CellGroup, Headline, LeaderboardCell, Measurement, Submission

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Group:
    campaign_id: int
    chip: str
    gpu_cores: int | None
    model_sha256: str

    def filter(self) -> dict[str, Any]:
        return {
            "campaign_id": self.campaign_id,
            "chip": self.chip,
            "gpu_cores": self.gpu_cores,
            "model_sha256": self.model_sha256,
        }

    def task_args(self) -> tuple[int, str, int | None, str]:
        return (self.campaign_id, self.chip, self.gpu_cores, self.model_sha256)

    def lock_name(self) -> str:
        return f"{self.campaign_id}:{self.chip}:{self.gpu_cores}:{self.model_sha256}"

    @classmethod
    def of(cls, submission: Submission) -> Group:
        return cls(submission.campaign_id, submission.chip, submission.gpu_cores, submission.model_sha256)

    def waiting_submissions(self) -> QuerySet[Submission]:
        """Submissions of the group whose measurements are not yet in its cells."""
        return Submission.objects.filter(cells_refreshed_at__isnull=True, **self.filter())


def ensure_group(group: Group) -> None:
    """The group's lock row; created in the transaction that stores its first submission."""
    CellGroup.objects.get_or_create(**group.filter())


def _lock(group: Group) -> None:
    """Serialise refreshes of one group, so a slow refresh never overwrites a newer one with an
    older reading: an UPDATE of the group's row, the first write of the transaction, row-locks it on
    PostgreSQL and takes SQLite's write lock, on both before anything is read."""
    if not CellGroup.objects.filter(**group.filter()).update(refreshed_at=timezone.now()):
        CellGroup.objects.create(**group.filter(), refreshed_at=timezone.now())


# What a cell takes of a measurement.
ROW_FIELDS = (
    "variant_name",
    "batch_size",
    "excluded_reason",
    "contributor_id",
    "memory_bytes",
    "speedup",
    "baseline_tg_tps",
    "submission_id",
)
NOT_IN_CELLS = (Measurement.Excluded.NONSTANDARD, Measurement.Excluded.WITHDRAWN)


def compute_cells(group: Group) -> tuple[list[LeaderboardCell], list[Headline]]:
    """Every cell of the group, from all of its measurements (PROTOCOL.md 5.1), and each variant's
    headline over the campaign's batch sizes 2-8."""
    rows: dict[tuple[str, int], list[stats.Row]] = defaultdict(list)
    excluded: dict[tuple[str, int], dict[str, int]] = {}
    first: dict[tuple[str, int], tuple[Any, Any]] = {}  # (received_at, submission) of the one naming the cell
    # The submissions' arrival and model claim, once each: joined to each of their ~27 rows instead,
    # they were most of a refresh's read (docs/performance.md, section 2).
    claims = {
        pk: (received, label or name, quant)
        for pk, received, label, name, quant in Submission.objects.filter(**group.filter())
        .order_by()
        .values_list("pk", "received_at", "model_file__label", "model_file__file_name", "model_file__file_type")
    }
    measurements = (
        Measurement.objects.filter(**group.filter())
        .exclude(excluded_reason__in=NOT_IN_CELLS)
        .order_by()
        .values_list(*ROW_FIELDS)
    )
    for (
        variant,
        batch_size,
        reason,
        contributor,
        memory,
        speedup,
        baseline,
        submission,
    ) in measurements.iterator(chunk_size=5000):
        key = (variant, batch_size)
        counts = excluded.setdefault(key, dict.fromkeys(Measurement.COUNTED_EXCLUSIONS, 0))
        received = claims[submission][0]
        if key not in first or (received, submission) < first[key]:
            first[key] = (received, submission)
        if reason:
            counts[reason] += 1
        elif speedup is not None and baseline is not None:
            rows[key].append(stats.Row((contributor, memory), contributor, speedup, baseline))
    cells = []
    for key, counts in sorted(excluded.items()):
        aggregate = stats.cell_stats(rows[key])
        _, model, quant = claims[first[key][1]]
        cells.append(
            LeaderboardCell(
                **group.filter(),
                variant=key[0],
                batch_size=key[1],
                model=model,
                quant=quant,
                excluded=counts,
                **asdict(aggregate),
            )
        )
    return cells, _headlines(group, rows)


def _headlines(group: Group, rows: dict[tuple[str, int], list[stats.Row]]) -> list[Headline]:
    sweep = Campaign.objects.only("definition").get(pk=group.campaign_id).definition["sweep"]
    sizes = sorted(size for size in sweep["batch_sizes"] if Headline.FROM_BATCH <= size <= Headline.TO_BATCH)
    by_machine: dict[str, dict[Hashable, dict[int, list[float]]]] = defaultdict(lambda: defaultdict(dict))
    for (variant, batch_size), cell_rows in rows.items():
        for row in cell_rows:
            by_machine[variant][row.machine].setdefault(batch_size, []).append(row.speedup)
    headlines = []
    for variant, machines in sorted(by_machine.items()):
        found = stats.headline_stats(machines.values(), sizes)
        headlines.append(Headline(**group.filter(), variant=variant, batch_sizes=sizes, **asdict(found)))
    return headlines


@transaction.atomic
def refresh_group(group: Group, only_if_waiting: bool = False) -> int:
    """Recompute the group's cells and mark its waiting submissions refreshed; returns the number
    of cells. With only_if_waiting a duplicate or late refresh message costs one query."""
    if only_if_waiting and not group.waiting_submissions().exists():
        return 0
    _lock(group)
    # Listed after the lock and before the read: every submission listed has committed, so the read
    # below sees its rows. One that commits later stays waiting for its own queued refresh.
    waiting = list(group.waiting_submissions().values_list("pk", flat=True))
    cells, headlines = compute_cells(group)
    LeaderboardCell.objects.filter(**group.filter()).delete()
    LeaderboardCell.objects.bulk_create(cells)
    Headline.objects.filter(**group.filter()).delete()
    Headline.objects.bulk_create(headlines)
    if waiting:
        Submission.objects.filter(pk__in=waiting).update(cells_refreshed_at=timezone.now())
    return len(cells)


def refresh_submission_cells(submission_id: str) -> int:
    """Refresh the group of cells the submission touches (and so mark it refreshed)."""
    submission = Submission.objects.filter(pk=submission_id).first()
    if submission is None:
        return 0
    return refresh_group(Group.of(submission))


def all_groups() -> list[Group]:
    return [
        Group(*values)
        for values in CellGroup.objects.order_by("pk").values_list("campaign_id", "chip", "gpu_cores", "model_sha256")
    ]


def refresh_all_cells() -> int:
    """Recompute every group's cells, one group at a time (memory bounded by the largest group),
    and drop cells of no group."""
    count = 0
    groups = all_groups()
    for group in groups:
        try:
            count += refresh_group(group)
        except Exception:  # one group's failure must not stop the others'; the sweeper retries it
            logger.exception("could not refresh %s", group)
    known = set(groups)
    stray = (
        LeaderboardCell.objects.order_by().values_list("campaign_id", "chip", "gpu_cores", "model_sha256").distinct()
    )
    for values in stray:
        if Group(*values) not in known:
            LeaderboardCell.objects.filter(**Group(*values).filter()).delete()
            Headline.objects.filter(**Group(*values).filter()).delete()
    return count
