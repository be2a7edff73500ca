"""The read model: the group, its cells and its headlines as the service reads them back.

A *group* is the cells of one (campaign, chip, GPU core count, model file, backend) at one campaign
version: what one submission touches, what one refresh recomputes (cells.py), and the family whose
verdicts are controlled together (docs/protocol.md, section 7). A chip's page shows many groups.
`CellRow` is one stored cell and `HeadlineRow` one variant's headline in a group: the judgement
(benchhub_protocol.stats.Judged, declared once) and what places and counts it. The pages, the
Markdown export and the templates read these two types; the API's leaderboard writes `api_rows`, a
CellRow's fields in its order read straight from the query. The measurements CSV joins each
measurement's stored cell in SQL (api/exports.py).
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

from benchhub_protocol.stats import HeadlineStats, Judged, verdict_label
from django.db.models import QuerySet
from django.utils.text import slugify

from benchhub.results.models import Headline, LeaderboardCell, Submission

# What a group is: every cell and headline of a group shares these, and a submission belongs to one.
GROUP_KEY = ("campaign_id", "chip", "gpu_cores", "model_sha256", "backend")
# The stored group adds the campaign version whose measurement it holds (versions.py).
GROUP_FIELDS = (*GROUP_KEY, "campaign_version")


@dataclass(frozen=True)
class Group:
    """One group: the cells of one campaign, chip, GPU core count, model file and backend."""

    campaign_id: int
    chip: str
    gpu_cores: int | None
    model_sha256: str
    backend: str
    # The campaign version whose measurement the cells hold (versions.py): older ones are groups apart.
    campaign_version: int = 1

    def filter(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in GROUP_FIELDS}

    def task_args(self) -> tuple[int, str, int | None, str, str, int]:
        return (self.campaign_id, self.chip, self.gpu_cores, self.model_sha256, self.backend, self.campaign_version)

    def lock_name(self) -> str:
        return ":".join(str(value) for value in self.task_args())

    @classmethod
    def of(cls, submission: Submission) -> Group:
        return cls(*(getattr(submission, name) for name in GROUP_FIELDS))

    def submissions(self) -> QuerySet[Submission]:
        return Submission.objects.filter(**self.filter())

    def waiting_submissions(self) -> QuerySet[Submission]:
        """Submissions of the group whose measurements are not yet in its cells."""
        return Submission.objects.filter(cells_refreshed_at__isnull=True, **self.filter())


@dataclass
class _CellPlace:
    """Which cell it is, and its throughput: what the API writes before the judgement."""

    chip: str
    gpu_cores: int | None
    model: str
    model_sha256: str
    quant: str
    variant: str
    commit: str
    batch_size: int
    baseline_tg_tps: float | None
    tg_tps: float | None


@dataclass
class _CellCounts:
    """What the cell stands under and counts: what the API writes after the judgement."""

    min_effect: float
    campaign_version: int
    superseded: bool
    n_machines: int
    n_submissions: int
    n_contributors: int
    n_pending: int
    excluded: dict[str, int]
    backend: str
    control: bool


@dataclass(slots=True)
class CellRow(_CellCounts, Judged, _CellPlace):
    """One stored cell (LeaderboardCell), as every reader reads it. A dataclass lists its bases' fields
    from the last base to the first, so these are the API's fields in its order (docs/protocol.md,
    "Row fields"; then backend and control): the place, the judgement (stats.Judged), the counts."""

    @property
    def verdict_text(self) -> str:
        return verdict_label(self.verdict, self.min_effect)


CELL_FIELDS = tuple(field.name for field in fields(CellRow))


@dataclass(slots=True)
class HeadlineRow(HeadlineStats):
    """One variant's headline in a group (results.models.Headline): per machine the geometric mean
    over the campaign's headline batch sizes, then the typical machine's figure with its interval,
    prediction and verdict, as a cell's. A published line's headline has no interval and 0 machines."""

    chip: str
    gpu_cores: int | None
    model_sha256: str
    variant: str
    batch_sizes: tuple[int, ...]
    backend: str = ""
    commit: str = ""
    control: bool = False


HEADLINE_FIELDS = tuple(field.name for field in fields(HeadlineRow))


def cell_rows(cells: QuerySet[LeaderboardCell]) -> list[CellRow]:
    return [CellRow(*values) for values in cells.values_list(*CELL_FIELDS)]


def api_rows(cells: QuerySet[LeaderboardCell]) -> list[dict[str, Any]]:
    """The cells as the API writes them (and the snapshot's readers and recompute_cells.py compare):
    a CellRow's fields in its order, read straight into dicts, as a board holds thousands."""
    return list(cells.values(*CELL_FIELDS))


def current_cell_rows(**filters: Any) -> list[CellRow]:
    """Cells of the current campaign versions: superseded ones are shown apart (campaign_versions.py)."""
    return cell_rows(LeaderboardCell.objects.filter(superseded=False, **filters))


def headline_rows(headlines: QuerySet[Headline]) -> list[HeadlineRow]:
    rows = [HeadlineRow(*values) for values in headlines.values_list(*HEADLINE_FIELDS)]
    for row in rows:
        row.batch_sizes = tuple(row.batch_sizes)  # stored as a JSON list
    return rows


def current_headline_rows(**filters: Any) -> list[HeadlineRow]:
    return headline_rows(Headline.objects.filter(superseded=False, **filters))


def chip_label(chip: str, gpu_cores: int | None) -> str:
    return f"{chip} ({gpu_cores}-core GPU)" if gpu_cores else chip


def chip_slug(chip: str, gpu_cores: int | None) -> str:
    """The URL of a chip's page, which shows every group of that chip and GPU core count."""
    return slugify(f"{chip} {gpu_cores}c") if gpu_cores else slugify(chip)
