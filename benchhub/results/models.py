"""The results domain: campaigns, what was received (immutable) and what is derived from it.

Derived tables (Measurement, LeaderboardCell) can always be rebuilt from RawEnvelope rows with
`manage.py rebuild_cells`; pages and the API read cells and never aggregate raw rows per request.
"""

from __future__ import annotations

import os
import uuid
from datetime import UTC, datetime
from typing import Any

from django.db import models
from django.db.models import F, Q
from django.db.models.functions import Coalesce

from benchhub.accounts.models import Contributor, PublicKey


class Campaign(models.Model):
    """One A/B campaign; `definition` is the JSON of agent/benchhub_agent/data/campaigns/<slug>.json."""

    slug = models.SlugField(max_length=64, unique=True)
    title = models.CharField(max_length=200)
    description = models.TextField(blank=True)
    repo = models.URLField(max_length=500)
    baseline = models.CharField(max_length=64)
    definition = models.JSONField()
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ("slug",)

    def __str__(self) -> str:
        return self.slug

    @property
    def variant_names(self) -> list[str]:
        return [variant["name"] for variant in self.definition["variants"]]


class Machine(models.Model):
    """Hardware and OS facts; identical machines share a row (keyed by `fingerprint`)."""

    fingerprint = models.CharField(max_length=64, unique=True, help_text="sha256 of the canonical facts")
    os = models.CharField(max_length=16)
    os_version = models.CharField(max_length=200)
    os_build = models.CharField(max_length=200, blank=True)
    arch = models.CharField(max_length=200)
    chip = models.CharField(max_length=200, db_index=True)
    cpu_cores_performance = models.PositiveBigIntegerField()
    cpu_cores_efficiency = models.PositiveBigIntegerField()
    gpu_name = models.CharField(max_length=200)
    gpu_cores = models.PositiveIntegerField(null=True)
    memory_bytes = models.BigIntegerField()
    backend = models.CharField(max_length=16)

    def __str__(self) -> str:
        cores = f" {self.gpu_cores}-core GPU" if self.gpu_cores else ""
        return f"{self.chip}{cores}, {self.memory_bytes // 2**30} GiB ({self.backend})"


class ModelFile(models.Model):
    """A GGUF file, identified by the sha256 of its bytes."""

    sha256 = models.CharField(max_length=64, unique=True)
    file_name = models.CharField(max_length=255)
    architecture = models.CharField(max_length=200)
    n_params = models.BigIntegerField()
    file_type = models.CharField(max_length=32, db_index=True)
    size_bytes = models.BigIntegerField()
    tensor_bytes_by_type = models.JSONField(default=dict)
    label = models.CharField(max_length=200, blank=True)

    def __str__(self) -> str:
        return self.label or self.file_name


def time_ordered_uuid(at: datetime | None = None) -> uuid.UUID:
    """A version 7 UUID (RFC 9562): 48 bits of Unix milliseconds, then 74 random bits. Submissions
    are numbered in the order they arrive, so every index keyed by the submission takes new entries
    at its end, in pages already in memory, instead of at random places across all of its history
    (docs/performance.md, section 2). `at` numbers a submission received at another time (the
    benchmarks' generated states)."""
    milliseconds = int((at or datetime.now(UTC)).timestamp() * 1000) & (2**48 - 1)
    random_bits = int.from_bytes(os.urandom(10), "big")
    value = milliseconds << 80 | 0x7 << 76 | (random_bits >> 62 & 0xFFF) << 64 | 0b10 << 62 | random_bits & (2**62 - 1)
    return uuid.UUID(int=value)


class SubmissionQuerySet(models.QuerySet["Submission"]):
    def public(self) -> SubmissionQuerySet:
        return self.filter(hidden=False)


class Submission(models.Model):
    class Status(models.TextChoices):
        ACCEPTED = "accepted"
        FLAGGED = "flagged"

    id = models.UUIDField(primary_key=True, default=time_ordered_uuid, editable=False)
    campaign = models.ForeignKey(Campaign, on_delete=models.PROTECT, related_name="submissions")
    contributor = models.ForeignKey(Contributor, on_delete=models.PROTECT, related_name="submissions")
    # No index of its own: submission_key_nonce_unique leads with it.
    key = models.ForeignKey(PublicKey, on_delete=models.PROTECT, related_name="submissions", db_index=False)
    machine = models.ForeignKey(Machine, on_delete=models.PROTECT, related_name="submissions")
    model_file = models.ForeignKey(ModelFile, on_delete=models.PROTECT, related_name="submissions")
    nonce = models.CharField(max_length=32)
    # Unique (submission_payload_unique): the same payload bytes signed by a second key are a replay
    # of another contributor's result. A constraint, not unique=True, which on PostgreSQL adds a
    # second index for LIKE that no lookup of a hash uses.
    payload_sha256 = models.CharField(max_length=64)
    created_at = models.DateTimeField(help_text="When the agent assembled the result (its clock).")
    received_at = models.DateTimeField(auto_now_add=True, db_index=True)
    status = models.CharField(max_length=16, choices=Status.choices)
    hidden = models.BooleanField(default=False, help_text="Hidden by a moderator: left out of every cell.")
    flags = models.JSONField(default=list, help_text="Agent flags and server-derived flags, sorted.")
    is_demo = models.BooleanField(default=False)
    agent_name = models.CharField(max_length=64)
    agent_version = models.CharField(max_length=64)
    power_source = models.CharField(max_length=16)
    low_power_mode = models.BooleanField(null=True)
    thermal = models.CharField(max_length=16)
    llama_cpp = models.JSONField(help_text="repo, build_type, cmake_flags, compiler")
    sweep_settings = models.JSONField(help_text="npp, ntg, n_ctx, flash_attn, n_gpu_layers, batch_sizes, order")
    cells_refreshed_at = models.DateTimeField(
        null=True, blank=True, help_text="Null until the cells this submission touches are recomputed."
    )
    # Its cells' group, copied from the machine and the model (both immutable): lists filtered by
    # chip and quant, and a group's waiting submissions, are then one index range, with no join.
    chip = models.CharField(max_length=200, default="")
    gpu_cores = models.PositiveIntegerField(null=True)
    quant = models.CharField(max_length=32, default="")

    objects = SubmissionQuerySet.as_manager()

    class Meta:
        ordering = ("-received_at", "-id")
        constraints = (
            models.UniqueConstraint(fields=["key", "nonce"], name="submission_key_nonce_unique"),
            models.UniqueConstraint(fields=["payload_sha256"], name="submission_payload_unique"),
        )
        indexes = (
            models.Index(fields=["cells_refreshed_at", "received_at"]),
            models.Index(fields=["chip", "quant", "-received_at", "-id"], name="submission_chip_quant_newest"),
            models.Index(fields=["chip", "gpu_cores", "-received_at", "-id"], name="submission_chip_cores_newest"),
        )

    def __str__(self) -> str:
        return str(self.id)


class RawEnvelope(models.Model):
    """The exact bytes received, written once in the ingest transaction and never changed."""

    submission = models.OneToOneField(Submission, primary_key=True, on_delete=models.PROTECT, related_name="raw")
    body = models.BinaryField()
    sha256 = models.CharField(max_length=64)
    received_at = models.DateTimeField(auto_now_add=True)

    def save(self, *args: Any, **kwargs: Any) -> None:
        if not self._state.adding:
            raise ValueError("Raw envelopes are immutable.")
        super().save(*args, **kwargs)

    def __str__(self) -> str:
        return f"envelope of {self.submission_id}"


class SubmissionVariant(models.Model):
    # No index of its own: variant_name_unique leads with it.
    submission = models.ForeignKey(Submission, on_delete=models.CASCADE, related_name="variants", db_index=False)
    position = models.PositiveSmallIntegerField(help_text="0 is the baseline")
    name = models.CharField(max_length=64)
    commit = models.CharField(max_length=40)
    patches = models.JSONField(default=list)
    env = models.JSONField(default=dict)

    class Meta:
        ordering = ("submission", "position")
        constraints = (models.UniqueConstraint(fields=["submission", "name"], name="variant_name_unique"),)

    def __str__(self) -> str:
        return self.name


class SweepRun(models.Model):
    """One llama-batched-bench invocation of one variant (one rep)."""

    submission = models.ForeignKey(Submission, on_delete=models.CASCADE, related_name="sweep_runs")
    variant = models.ForeignKey(SubmissionVariant, on_delete=models.CASCADE, related_name="runs")
    rep = models.PositiveSmallIntegerField()
    seq = models.PositiveIntegerField()
    exit_code = models.SmallIntegerField()

    class Meta:
        ordering = ("submission", "seq")


class SweepRow(models.Model):
    run = models.ForeignKey(SweepRun, on_delete=models.CASCADE, related_name="rows")
    batch_size = models.PositiveIntegerField()
    pp_tps = models.FloatField()
    tg_tps = models.FloatField()
    t_pp_s = models.FloatField()
    t_tg_s = models.FloatField()

    class Meta:
        ordering = ("run", "batch_size")


class CorrectnessCheck(models.Model):
    class Status(models.TextChoices):
        PASS = "pass"
        FAIL = "fail"
        NOT_RUN = "not_run"

    submission = models.ForeignKey(Submission, on_delete=models.CASCADE, related_name="correctness")
    variant = models.ForeignKey(SubmissionVariant, on_delete=models.CASCADE, related_name="correctness")
    tool = models.CharField(max_length=64)
    op = models.CharField(max_length=32)
    backend = models.CharField(max_length=64)
    status = models.CharField(max_length=8, choices=Status.choices)
    passed = models.PositiveBigIntegerField()
    failed = models.PositiveBigIntegerField()
    reason = models.TextField(blank=True)


class GenerationCheck(models.Model):
    submission = models.ForeignKey(Submission, on_delete=models.CASCADE, related_name="generation")
    variant = models.ForeignKey(SubmissionVariant, on_delete=models.CASCADE, related_name="generation")
    prompt_id = models.CharField(max_length=64)
    n_tokens = models.PositiveBigIntegerField()
    output_sha256 = models.CharField(max_length=64)
    degenerate = models.BooleanField()
    repetition_score = models.FloatField()
    identical_to_baseline = models.BooleanField()


# Which measurements a cell's statistics take.
INCLUDED_IN_CELLS = Q(excluded_reason="", speedup__isnull=False, baseline_tg_tps__isnull=False)


class CellName(models.Model):
    """What names a leaderboard cell besides its campaign: the fields and the constraint shared by
    the cells' numbers (CellKey) and the cells themselves (LeaderboardCell)."""

    chip = models.CharField(max_length=200)
    gpu_cores = models.PositiveIntegerField(null=True)
    quant = models.CharField(max_length=32)
    variant = models.CharField(max_length=64)
    batch_size = models.PositiveIntegerField()

    class Meta:
        abstract = True

    @staticmethod
    def unique(name: str) -> models.UniqueConstraint:
        """One row per cell. gpu_cores is null off Apple GPUs; Coalesce makes two nulls collide, on
        PostgreSQL and SQLite."""
        fields = (F("campaign"), F("chip"), Coalesce("gpu_cores", -1), F("quant"), F("variant"), F("batch_size"))
        return models.UniqueConstraint(*fields, name=name)

    def __str__(self) -> str:
        return f"{self.chip}/{self.gpu_cores}/{self.quant}/{self.variant}/BS{self.batch_size}"


class CellKey(CellName):
    """The name of one leaderboard cell, numbered once, when a measurement first names it: each
    measurement carries the number, so the refresh's indexes lead with eight bytes instead of the
    six columns naming the cell (~60 of ~90 bytes an entry; docs/performance.md, section 2). Never
    deleted but with its campaign, so a number once given stays valid."""

    # No index of its own: cell_key_unique leads with it (with one, the planner read a group's
    # numbers by the campaign alone, every cell of the campaign).
    campaign = models.ForeignKey(Campaign, on_delete=models.CASCADE, related_name="+", db_index=False)

    class Meta:
        constraints = (CellName.unique("cell_key_unique"),)


class Measurement(models.Model):
    """One submission x variant x batch size, with the chip/quant/variant denormalised so that
    refreshing a cell and filtering the API are single indexed queries."""

    class Excluded(models.TextChoices):
        NONE = "", "included"
        CORRECTNESS_FAILED = "correctness_failed"
        DEGENERATE_OUTPUT = "degenerate_output"
        HIDDEN = "hidden"
        NONSTANDARD_SWEEP = "nonstandard_sweep"

    # No index of its own (each single-column index cost ~1 kB a submission and its upkeep at
    # ingest): measurement_unique leads with the submission.
    submission = models.ForeignKey(Submission, on_delete=models.CASCADE, related_name="measurements", db_index=False)
    variant = models.ForeignKey(SubmissionVariant, on_delete=models.CASCADE, related_name="measurements")
    # The campaign, the contributor and the cell are copies: of the submission's campaign and
    # contributor, which PROTECT theirs from deletion while it exists, and of the cell's number,
    # which lives as long as its campaign. So they are references without a constraint of the
    # database's own: each constraint cost the ingest a check per row at commit (~5.5 µs each, 0.45
    # ms a submission for the three) and a share lock on the row referenced, which writes that row's
    # page: every ingest rewrote the keys of its 27 cells (docs/performance.md, section 1). Nothing
    # is deleted through them (DO_NOTHING): a row that names one names a submission that keeps it.
    campaign = models.ForeignKey(
        Campaign, on_delete=models.DO_NOTHING, related_name="+", db_index=False, db_constraint=False
    )
    # Its index serves the measurements list filtered by contributor.
    contributor = models.ForeignKey(Contributor, on_delete=models.DO_NOTHING, related_name="+", db_constraint=False)
    # No index of its own: the refresh's indexes lead with it.
    cell_key = models.ForeignKey(
        CellKey, on_delete=models.DO_NOTHING, related_name="+", db_index=False, db_constraint=False
    )
    chip = models.CharField(max_length=200)
    gpu_cores = models.PositiveIntegerField(null=True)
    quant = models.CharField(max_length=32)
    variant_name = models.CharField(max_length=64)
    batch_size = models.PositiveIntegerField()
    tg_tps = models.FloatField(help_text="median over reps")
    baseline_tg_tps = models.FloatField(null=True, help_text="the baseline's median at this batch size")
    speedup = models.FloatField(null=True, help_text="tg_tps / baseline_tg_tps (paired within the submission)")
    spread = models.FloatField(help_text="(max - min) / median over reps")
    n_reps = models.PositiveSmallIntegerField()
    correctness_status = models.CharField(max_length=8, help_text="pass, fail, not_run or missing")
    excluded_reason = models.CharField(max_length=32, choices=Excluded.choices, blank=True, default="")

    class Meta:
        ordering = ("submission", "variant__position", "batch_size")
        constraints = (
            models.UniqueConstraint(fields=["submission", "variant_name", "batch_size"], name="measurement_unique"),
        )
        indexes = (
            # A full read of a group's cells takes only these columns of its cells' rows: covered, it
            # is an index-only scan instead of one heap page per submission in the cells' history.
            # Keyed by the cell's number alone rather than the six columns naming it: 8 bytes of
            # fixed-width key instead of ~50 with text and a nullable column, which made building it
            # at a rebuild its slowest step (docs/performance.md, section 4); and a group's numbers
            # are a list (= ANY) that PostgreSQL reads in index order only on an index's first column.
            models.Index(
                fields=["cell_key"],
                include=["submission", "tg_tps", "baseline_tg_tps", "speedup", "contributor", "excluded_reason"],
                name="measurement_cell_key_covering",
            ),
            # The measurements list filtered by chip and quant, newest first, walks this backwards
            # instead of filtering the whole primary key.
            models.Index(fields=["chip", "quant", "-id"], name="measurement_chip_quant_id"),
            # Whether a contributor has a stored included row in a cell (a cell counts its distinct
            # contributors), led by the contributor: a submission's 27 entries are one contributor's
            # entries in the 27 cells of one group, numbered together, so they land on a page or two
            # of the index instead of at 27 places across it.
            models.Index(
                fields=["contributor", "cell_key"],
                include=["submission"],
                condition=INCLUDED_IN_CELLS,
                name="measurement_contributor_cell",
            ),
        )


class LeaderboardCell(CellName):
    """The aggregate of PROTOCOL.md section 5 for one (campaign, chip, gpu_cores, quant, variant,
    batch size); recomputed by Celery only for the cells a submission touches."""

    # No index of its own: leaderboard_cell_unique leads with it.
    campaign = models.ForeignKey(Campaign, on_delete=models.CASCADE, related_name="cells", db_index=False)
    baseline_tg_tps = models.FloatField(null=True)
    tg_tps = models.FloatField(null=True)
    speedup = models.FloatField(null=True)
    ci_low = models.FloatField(null=True)
    ci_high = models.FloatField(null=True)
    n_submissions = models.PositiveIntegerField(default=0)
    n_contributors = models.PositiveIntegerField(default=0)
    n_excluded_correctness = models.PositiveIntegerField(default=0)
    n_excluded_degenerate = models.PositiveIntegerField(default=0)
    order_state = models.JSONField(
        null=True,
        editable=False,
        help_text="The elements at the ranks the statistics need, per column (stats.OrderState): what an "
        "incremental refresh starts from. Null: unknown, the next refresh reads the whole cell.",
    )
    order_band = models.JSONField(
        null=True,
        editable=False,
        help_text="Per column, [below, above, lo, hi] of its band in CellBand (stats.Band): where an incremental "
        "refresh finds the tracked elements' neighbours. Null: unknown, the next refresh reads the whole cell.",
    )
    updated_at = models.DateTimeField(auto_now=True)
    revision = models.PositiveBigIntegerField(
        default=0, editable=False, help_text="Raised by one each time a refresh rewrites the cell in place."
    )

    # When and how often the cell was written, not what it holds.
    WRITE_MARKS = frozenset({"updated_at", "revision"})
    # Where a refresh looks for neighbours: it depends on the order values arrived in, not on them.
    BOOKKEEPING = frozenset({"order_band"})

    class Meta:
        ordering = ("campaign", "chip", "gpu_cores", "quant", "batch_size", "variant")
        constraints = (CellName.unique("leaderboard_cell_unique"),)


class CellBand(models.Model):
    """The stored elements of one stretch of one column's order in one cell (stats.Band), around
    the ranks its statistics need: what an incremental refresh steps the tracked elements through.
    Derived, like the cells, and rewritten with them by a full read (cells.py)."""

    pk = models.CompositePrimaryKey("cell_key", "column_number", "value", "submission")
    # No index of its own: the primary key leads with it.
    cell_key = models.ForeignKey(CellKey, on_delete=models.CASCADE, related_name="+", db_index=False)
    column_number = models.PositiveSmallIntegerField(help_text="the column's place in stats.COLUMNS")
    value = models.FloatField()
    submission = models.UUIDField(help_text="the element's tie-breaking key: the submission of its row")
