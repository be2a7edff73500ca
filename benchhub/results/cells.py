"""Leaderboard cells, recomputed a group at a time from the group's stored measurements.

All cells a submission touches share its campaign, chip, GPU core count, model file and backend:
a group (board.Group), the family whose verdicts are controlled together. A
refresh, under the group's lock, has the database tally the group's measurements and hand back
the counted ones (group_sums.py), judges them with benchhub_protocol.stats.judge_page (machines
combined as studies, cells v4), replaces the group's cells and marks the submissions it took in
as refreshed. Idempotent: running it twice, or after a crash, gives the same cells.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import fields
from datetime import datetime, timedelta
from typing import Any

from benchhub_protocol import stats
from django.conf import settings
from django.db import transaction
from django.utils import timezone

from benchhub.results import claims, group_sums, versions
from benchhub.results.board import GROUP_FIELDS, Group
from benchhub.results.campaigns import campaign_rules, headline_sizes
from benchhub.results.models import CellGroup, Headline, LeaderboardCell, Submission
from benchhub.rows import get_or_insert

logger = logging.getLogger(__name__)


def ensure_group(group: Group) -> None:
    """The group's lock row; created in the transaction that stores its first submission."""
    get_or_insert(CellGroup, group.filter())


def _lock(group: Group) -> None:
    """Serialise refreshes of one group, so a slow refresh never overwrites a newer one with an
    older reading: an UPDATE of the group's row, the first write of the transaction, row-locks it on
    PostgreSQL and takes SQLite's write lock, on both before anything is read."""
    if not CellGroup.objects.filter(**group.filter()).update(refreshed_at=timezone.now()):
        CellGroup.objects.create(**group.filter(), refreshed_at=timezone.now())


def probation_since() -> datetime | None:
    """Keys registered after this are on probation (BENCHHUB_KEY_PROBATION_S): their rows wait
    (n_pending). None without probation."""
    probation = settings.BENCHHUB_KEY_PROBATION_S
    return timezone.now() - timedelta(seconds=probation) if probation > 0 else None


def predict_cycles(definition: dict[str, Any]) -> int:
    """The run length, in whole cycles, that a cell's prediction is stated for: the campaign's
    `sweep.cycles`, else stats.PREDICT_CYCLES."""
    return int(definition.get("sweep", {}).get("cycles") or stats.PREDICT_CYCLES)


def compute_cells(
    group: Group, held: bool, name: tuple[str, str] | None = None
) -> tuple[list[LeaderboardCell], list[Headline]]:
    """Every cell of the group and each variant's headline, from all of its measurements
    (docs/protocol.md, cells), reduced in the database (group_sums) and judged by stats.judge_page;
    `held`: whether the group's submissions flagged model_held count as held (their file is disputed);
    `name`: the file's (name, quant) where the claims decide it (claims.display_name), else each
    cell is named by the submission the reduction picks."""
    definition = versions.rules_manifest(group.campaign_id, group.campaign_version)
    superseded = group.campaign_version != versions.current_cells(group.campaign_id)
    rules = campaign_rules(definition)
    control = group.backend not in rules.patched_backends
    sizes = list(headline_sizes(definition))
    found = group_sums.group_sums(group.filter(), held=held, on_probation_since=probation_since(), headline_sizes=sizes)
    page = stats.judge_page(found.page, min_effect=rules.min_effect, predict_cycles=predict_cycles(definition))
    # The model claim of the submission naming each cell, read once per naming submission.
    names = {
        pk: (label or name, quant)
        for pk, label, name, quant in Submission.objects.filter(
            pk__in={tally.named_by for tally in found.tallies.values()}
        ).values_list("pk", "model_file__label", "model_file__file_name", "model_file__file_type")
    }
    cells = []
    for (variant, commit, batch_size), tally in sorted(found.tallies.items()):
        model, quant = name or names[tally.named_by]
        cells.append(
            LeaderboardCell(
                **group.filter(),
                variant=variant,
                commit=commit,
                batch_size=batch_size,
                model=model,
                quant=quant,
                excluded=tally.excluded,
                n_pending=tally.n_pending,
                min_effect=rules.min_effect,
                control=control,
                superseded=superseded,
                **shallow(page.cells[(variant, commit, batch_size)]),
            )
        )
    headlines = [
        Headline(
            **group.filter(),
            variant=variant,
            commit=commit,
            batch_sizes=sizes,
            control=control,
            superseded=superseded,
            **shallow(judged),
        )
        for (variant, commit), judged in sorted(page.headlines.items())
    ]
    return cells, headlines


def shallow(found: Any) -> dict[str, Any]:
    """A dataclass's fields by name, not copied (dataclasses.asdict deep-copies each value: a tenth of a
    small group's refresh)."""
    return {field.name: getattr(found, field.name) for field in fields(found)}


@transaction.atomic
def refresh_group(group: Group, only_if_waiting: bool = False, on_locked: Callable[[], None] | None = None) -> int:
    """Recompute the group's cells and mark its waiting submissions refreshed; returns the number
    of cells. With only_if_waiting a refresh that finds, once it holds the lock, that an earlier one
    took every waiting submission stops there and returns 0. `on_locked` runs once the lock is
    held, before the waiting submissions are listed (tasks.py coalesces refreshes with it)."""
    _lock(group)
    if on_locked is not None:
        on_locked()
    # Listed after the lock and before the read: every submission listed has committed, so the read
    # below sees its rows. One that commits later stays waiting for its own queued refresh.
    waiting = list(group.waiting_submissions().values_list("pk", flat=True))
    if only_if_waiting and not waiting:
        return 0
    # A file never disputed (nearly every one) costs one small query on its claims, not its submissions;
    # a disputed one's held submissions are flagged model_held, which compute_cells reads.
    found = claims.standing(group.model_sha256) if claims.in_dispute(group.model_sha256) else None
    if found is not None:
        _mark_held(group, claims.held_in(group.submissions(), found))
    name = claims.display_name(group.model_sha256, found)
    cells, headlines = compute_cells(group, held=found is not None, name=name)
    LeaderboardCell.objects.filter(**group.filter()).delete()
    LeaderboardCell.objects.bulk_create(cells)
    Headline.objects.filter(**group.filter()).delete()
    Headline.objects.bulk_create(headlines)
    if waiting:
        Submission.objects.filter(pk__in=waiting).update(cells_refreshed_at=timezone.now())
    return len(cells)


def _mark_held(group: Group, held: set[Any]) -> None:
    """What each submission's page says of its model claim follows the claims' current state."""
    submissions = group.submissions()
    submissions.filter(model_held=True).exclude(pk__in=held).update(model_held=False)
    submissions.filter(model_held=False, pk__in=held).update(model_held=True)


def refresh_submission_cells(submission_id: str) -> int:
    """Refresh the group of cells the submission touches (and so mark it refreshed)."""
    submission = Submission.objects.filter(pk=submission_id).first()
    if submission is None:
        return 0
    return refresh_group(Group.of(submission))


def all_groups() -> list[Group]:
    return [Group(*values) for values in CellGroup.objects.order_by("pk").values_list(*GROUP_FIELDS)]


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
    stray = LeaderboardCell.objects.order_by().values_list(*GROUP_FIELDS).distinct()
    for values in stray:
        if Group(*values) not in known:
            LeaderboardCell.objects.filter(**Group(*values).filter()).delete()
            Headline.objects.filter(**Group(*values).filter()).delete()
    return count
