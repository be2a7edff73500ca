"""Recompute leaderboard cells from Measurement rows. Every function is idempotent: running one
twice, or after a crash, gives the same cells.

All cells a submission touches share its campaign, chip, GPU core count and quant (one machine,
one model): a "group". A refresh recomputes a whole group: one indexed read (grouped per cell
inside the database, so Python receives one row per cell, not one per submission), one DELETE and
one INSERT of its cells, and one UPDATE marking every submission that was waiting for the group as
refreshed. Refreshes are queued per group, not per submission, so a burst of submissions into one
group costs one refresh (tasks.queue_refresh).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

from django.db import connection, transaction
from django.db.models import Aggregate, Count, Field, Q, QuerySet
from django.utils import timezone

from benchhub.results import stats
from benchhub.results.models import LeaderboardCell, Measurement, Submission

# (variant, batch size) within a group
CellName = tuple[str, int]
INCLUDED = Q(excluded_reason=Measurement.Excluded.NONE, speedup__isnull=False, baseline_tg_tps__isnull=False)


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

    def task_args(self) -> tuple[int, str, int | None, str]:
        return (self.campaign_id, self.chip, self.gpu_cores, self.quant)

    @classmethod
    def of(cls, submission: Submission) -> Group:
        """The group of every cell the submission touches (measurements copy these four facts)."""
        return cls(
            submission.campaign_id,
            submission.machine.chip,
            submission.machine.gpu_cores,
            submission.model_file.file_type,
        )

    def waiting_submissions(self) -> QuerySet[Submission]:
        """Submissions of the group whose measurements are not yet in its cells."""
        return Submission.objects.filter(
            cells_refreshed_at__isnull=True,
            campaign_id=self.campaign_id,
            machine__chip=self.chip,
            machine__gpu_cores=self.gpu_cores,
            model_file__file_type=self.quant,
        )


def _lock(group: Group) -> None:
    """Serialise refreshes of one group, so a slow refresh can never overwrite a newer one with an
    older snapshot; taken before reading, so the read sees every committed measurement."""
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(%s)", [group.lock_id()])


class ListAgg(Aggregate):
    """The grouped rows' values as a list: array_agg on PostgreSQL, json_group_array on SQLite."""

    function = "ARRAY_AGG"
    output_field = Field()  # no conversion: a list from psycopg, a JSON text from SQLite

    def as_sqlite(self, compiler: Any, connection: Any, **extra_context: Any) -> Any:
        return super().as_sql(compiler, connection, function="JSON_GROUP_ARRAY", **extra_context)

    @staticmethod
    def values(stored: list[Any] | str | None) -> list[Any]:
        return json.loads(stored) if isinstance(stored, str) else stored or []


@dataclass(frozen=True)
class CellInputs:
    samples: stats.CellSamples
    n_excluded_correctness: int
    n_excluded_degenerate: int


def _read_group(group: Group) -> dict[CellName, CellInputs]:
    """Every cell's inputs, grouped per cell inside the database (one row per cell reaches Python,
    not one per submission): the included submissions' values, the excluded ones counted."""
    per_cell = (
        Measurement.objects.filter(**group.filter())
        .exclude(excluded_reason=Measurement.Excluded.HIDDEN)
        .order_by()
        .values("variant_name", "batch_size")
        .annotate(
            tg_values=ListAgg("tg_tps", filter=INCLUDED),
            baseline_values=ListAgg("baseline_tg_tps", filter=INCLUDED),
            speedup_values=ListAgg("speedup", filter=INCLUDED),
            contributor_values=ListAgg("contributor_id", filter=INCLUDED),
            n_correctness=Count("batch_size", filter=Q(excluded_reason=Measurement.Excluded.CORRECTNESS_FAILED)),
            n_degenerate=Count("batch_size", filter=Q(excluded_reason=Measurement.Excluded.DEGENERATE_OUTPUT)),
        )
    )
    return {
        (row["variant_name"], row["batch_size"]): CellInputs(
            stats.CellSamples(
                ListAgg.values(row["tg_values"]),
                ListAgg.values(row["baseline_values"]),
                ListAgg.values(row["speedup_values"]),
                ListAgg.values(row["contributor_values"]),
            ),
            row["n_correctness"],
            row["n_degenerate"],
        )
        for row in per_cell
    }


def _cell(group: Group, name: CellName, inputs: CellInputs) -> LeaderboardCell:
    aggregate = stats.aggregate(inputs.samples)
    return LeaderboardCell(
        **group.filter(),
        variant=name[0],
        batch_size=name[1],
        tg_tps=aggregate.tg_tps if aggregate else None,
        baseline_tg_tps=aggregate.baseline_tg_tps if aggregate else None,
        speedup=aggregate.speedup if aggregate else None,
        ci_low=aggregate.ci_low if aggregate else None,
        ci_high=aggregate.ci_high if aggregate else None,
        n_submissions=aggregate.n_submissions if aggregate else 0,
        n_contributors=aggregate.n_contributors if aggregate else 0,
        n_excluded_correctness=inputs.n_excluded_correctness,
        n_excluded_degenerate=inputs.n_excluded_degenerate,
    )


@transaction.atomic
def refresh_group(group: Group, only_if_waiting: bool = False) -> int:
    """Recompute every cell of the group and mark the submissions that waited for it as refreshed;
    returns the number of cells. With only_if_waiting, a group nobody waits for is left alone
    (a duplicate or late refresh message costs one query)."""
    _lock(group)
    # Read before the measurements: every submission listed here has committed, so its rows are in
    # the read below. One that commits in between is read but stays waiting: its own queued
    # refresh runs again, never the other way round (marked refreshed but missing from the cells).
    waiting = list(group.waiting_submissions().values_list("pk", flat=True))
    if only_if_waiting and not waiting:
        return 0
    inputs = _read_group(group)
    LeaderboardCell.objects.filter(**group.filter()).delete()
    LeaderboardCell.objects.bulk_create([_cell(group, name, cell_inputs) for name, cell_inputs in inputs.items()])
    if waiting:
        Submission.objects.filter(pk__in=waiting).update(cells_refreshed_at=timezone.now())
    return len(inputs)


def refresh_submission_cells(submission_id: str) -> int:
    """Refresh the group of cells the submission touches (and so mark it refreshed)."""
    submission = Submission.objects.select_related("machine", "model_file").filter(pk=submission_id).first()
    if submission is None:
        return 0
    return refresh_group(Group.of(submission))


def refresh_all_cells() -> int:
    """Recompute every cell that has measurements and drop cells that have none, one group at a
    time (memory bounded by the largest group, not by the table)."""
    groups = {
        Group(*values)
        for values in Measurement.objects.order_by().values_list("campaign_id", "chip", "gpu_cores", "quant").distinct()
    }
    count = sum(refresh_group(group) for group in sorted(groups, key=Group.sort_key))
    for values in (
        LeaderboardCell.objects.order_by().values_list("campaign_id", "chip", "gpu_cores", "quant").distinct()
    ):
        if Group(*values) not in groups:
            LeaderboardCell.objects.filter(**Group(*values).filter()).delete()
    return count
