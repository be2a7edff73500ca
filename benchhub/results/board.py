"""The read model: the group, its cells and its headlines as the service reads them back.

A *group* is the cells of one (campaign, chip, GPU core count, model file, backend) at one campaign
version: what one submission touches, what one refresh recomputes (cells.py), and the family whose
verdicts are controlled together (docs/protocol.md, section 7). A chip's page shows many groups.
`CellRow` is one stored cell and `HeadlineRow` one variant's headline in a group, read as tuples
(pages hold hundreds of cells); the API's leaderboard, the Markdown export and the templates all
read these two types, and `CellRow.as_api` is the one serialised form of a cell (its fields are the
API's). The measurements CSV joins each measurement's stored cell in SQL (api/exports.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple

from benchhub_protocol.stats import verdict_label
from benchhub_protocol.words import TOO_FEW
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


class CellRow(NamedTuple):
    """One stored cell (LeaderboardCell), as every reader reads it, its fields in the order the API
    writes them (docs/protocol.md, "Row fields"; then backend and control)."""

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
    speedup: float | None
    interval: str | None
    ci_low: float | None
    ci_high: float | None
    predict_low: float | None
    predict_high: float | None
    predict_level: float | None
    tau: float | None
    i2: float | None
    verdict: str
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

    @property
    def verdict_text(self) -> str:
        return verdict_label(self.verdict, self.min_effect)

    def as_api(self) -> dict[str, Any]:
        """The row as the API writes it (and the snapshot's readers and recompute_cells.py compare)."""
        return self._asdict()


class HeadlineRow(NamedTuple):
    """One variant's headline in a group (results.models.Headline): per machine the geometric mean
    over the campaign's headline batch sizes, then the typical machine's figure with its interval,
    prediction and verdict, as a cell's. A published line's headline has no interval and 0 machines."""

    chip: str
    gpu_cores: int | None
    model_sha256: str
    variant: str
    batch_sizes: tuple[int, ...]
    speedup: float | None
    interval: str | None
    ci_low: float | None
    ci_high: float | None
    n_machines: int
    verdict: str = TOO_FEW
    backend: str = ""
    commit: str = ""
    control: bool = False
    predict_low: float | None = None
    predict_high: float | None = None
    predict_level: float | None = None
    tau: float | None = None
    i2: float | None = None


def cell_rows(cells: QuerySet[LeaderboardCell]) -> list[CellRow]:
    return [CellRow(*values) for values in cells.values_list(*CellRow._fields)]


def current_cell_rows(**filters: Any) -> list[CellRow]:
    """Cells of the current campaign versions: superseded ones are shown apart (campaign_versions.py)."""
    return cell_rows(LeaderboardCell.objects.filter(superseded=False, **filters))


def headline_rows(headlines: QuerySet[Headline]) -> list[HeadlineRow]:
    rows = (HeadlineRow(*values) for values in headlines.values_list(*HeadlineRow._fields))
    return [row._replace(batch_sizes=tuple(row.batch_sizes)) for row in rows]  # stored as a JSON list


def current_headline_rows(**filters: Any) -> list[HeadlineRow]:
    return headline_rows(Headline.objects.filter(superseded=False, **filters))


def chip_label(chip: str, gpu_cores: int | None) -> str:
    return f"{chip} ({gpu_cores}-core GPU)" if gpu_cores else chip


def chip_slug(chip: str, gpu_cores: int | None) -> str:
    """The URL of a chip's page, which shows every group of that chip and GPU core count."""
    return slugify(f"{chip} {gpu_cores}c") if gpu_cores else slugify(chip)
