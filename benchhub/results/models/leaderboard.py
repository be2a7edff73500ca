"""What the boards read: each group's cells and headlines, recomputed together from its measurements
(cells.py), and the group's own row, its lock."""

from __future__ import annotations

from benchhub_protocol.words import DEFAULT_MIN_EFFECT
from django.db import models
from django.db.models import F
from django.db.models.functions import Coalesce

from benchhub.results.models.campaigns import Campaign


class GroupColumns(models.Model):
    """The columns that name a group (board.GROUP_FIELDS): its cells, its headlines and its lock row."""

    campaign = models.ForeignKey(Campaign, on_delete=models.CASCADE, related_name="+", db_index=False)
    chip = models.CharField(max_length=200)
    gpu_cores = models.PositiveIntegerField(null=True)
    model_sha256 = models.CharField(max_length=64)
    backend = models.CharField(max_length=16, default="")
    campaign_version = models.PositiveIntegerField(
        default=1, help_text="the campaign version whose measurement it holds"
    )

    class Meta:
        abstract = True


def unique_in_group(name: str, *within: str) -> models.UniqueConstraint:
    """One row per group (and per `within` in it). gpu_cores is null off Apple GPUs; Coalesce makes two
    nulls collide, on PostgreSQL and SQLite."""
    return models.UniqueConstraint(
        F("campaign"),
        F("chip"),
        Coalesce("gpu_cores", -1),
        F("model_sha256"),
        F("backend"),
        *(F(column) for column in within),
        F("campaign_version"),
        name=name,
    )


class JudgedColumns(models.Model):
    """A cell's or a headline's judged figures (benchhub_protocol.stats.Judged)."""

    speedup = models.FloatField(null=True)
    interval = models.CharField(max_length=32, null=True, help_text="what the interval is, in words; null: none")
    ci_low = models.FloatField(null=True)
    ci_high = models.FloatField(null=True)
    predict_low = models.FloatField(null=True)
    predict_high = models.FloatField(null=True)
    predict_level = models.FloatField(null=True)
    tau = models.FloatField(null=True, help_text="spread of true effects between machines (log scale sd)")
    i2 = models.FloatField(null=True, help_text="share of the machines' spread that is between machines")
    verdict = models.CharField(max_length=20)

    class Meta:
        abstract = True


class LeaderboardCell(GroupColumns, JudgedColumns):
    """The aggregate of docs/protocol.md section 7 for one (campaign, chip, gpu_cores, model, variant,
    batch size); a group's cells are recomputed together from its measurements (cells.py)."""

    variant = models.CharField(max_length=64)
    commit = models.CharField(max_length=40, default="")
    batch_size = models.PositiveIntegerField()
    model = models.CharField(max_length=255, help_text="the model's label, else its file name")
    quant = models.CharField(max_length=32)
    baseline_tg_tps = models.FloatField(null=True)
    tg_tps = models.FloatField(null=True)
    min_effect = models.FloatField(default=DEFAULT_MIN_EFFECT)
    control = models.BooleanField(default=False, help_text="measured on a backend the campaign's patches do not touch")
    n_machines = models.PositiveIntegerField(default=0)
    n_submissions = models.PositiveIntegerField(default=0)
    n_contributors = models.PositiveIntegerField(default=0)
    n_pending = models.PositiveIntegerField(default=0, help_text="machines whose keys are still on probation")
    excluded = models.JSONField(default=dict, help_text="rows left out, by reason")
    superseded = models.BooleanField(default=False, help_text="a newer version measures something else: never ranked")
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ("campaign", "chip", "gpu_cores", "model", "batch_size", "variant")
        constraints = (unique_in_group("leaderboard_cell_unique", "variant", "commit", "batch_size"),)

    def __str__(self) -> str:
        return f"{self.chip}/{self.gpu_cores}/{self.model}/{self.variant}/BS{self.batch_size}"


class CellGroup(GroupColumns):
    """The cells of one (campaign, chip, gpu_cores, model file): what one submission touches, and
    what one refresh recomputes. Its row is the group's lock (cells.refresh_group)."""

    refreshed_at = models.DateTimeField(null=True)

    class Meta:
        constraints = (unique_in_group("cell_group_unique"),)


class Headline(GroupColumns, JudgedColumns):
    """The ranking's headline of one variant in one group: per machine, the geometric mean of its
    speedups over the campaign's batch sizes 2-8 (where speculative decoding's verify steps fall);
    then the median over machines with an interval that says what it is, as a cell's. Recomputed
    with the group's cells."""

    variant = models.CharField(max_length=64)
    commit = models.CharField(max_length=40, default="")
    batch_sizes = models.JSONField(help_text="the batch sizes every counted machine measured")
    control = models.BooleanField(default=False)
    n_machines = models.PositiveIntegerField(default=0)
    superseded = models.BooleanField(default=False)

    class Meta:
        constraints = (unique_in_group("headline_unique", "variant", "commit"),)
