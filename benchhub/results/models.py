"""The results domain: campaigns, what was received (immutable) and what is derived from it.

Derived tables (Measurement, LeaderboardCell) can always be rebuilt from RawEnvelope rows with
`manage.py rederive_measurements` (cells alone: `manage.py rebuild_cells`); pages and the API read
cells and never aggregate raw rows per request.
"""

from __future__ import annotations

import os
import uuid
from datetime import UTC, datetime
from typing import Any

from benchhub_protocol.words import DEFAULT_MIN_EFFECT
from django.db import models
from django.db.models import F
from django.db.models.functions import Coalesce

from benchhub.accounts.models import Contributor, PublicKey
from benchhub.results.published import ReferenceRow as ReferenceRow  # registered with the app's models


class Campaign(models.Model):
    """One A/B campaign; `definition` is a copy of its current version's manifest (CampaignVersion)."""

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


class CampaignVersion(models.Model):
    """One immutable version of a campaign (docs/protocol.md, campaign versions): its manifest, the
    digest over it and the offline campaign key's signature (empty for a draft). Campaign.definition
    is a copy of the current version's manifest."""

    class State(models.TextChoices):
        DRAFT = "draft"
        OPEN = "open"
        SUPERSEDED = "superseded"
        CLOSED = "closed"

    campaign = models.ForeignKey(Campaign, on_delete=models.CASCADE, related_name="versions")
    version = models.PositiveIntegerField()
    digest = models.CharField(max_length=64, unique=True)
    manifest = models.JSONField()
    signature = models.CharField(max_length=100, blank=True, help_text="base64 Ed25519 over the digest; empty: draft")
    state = models.CharField(max_length=16, choices=State.choices)
    measured_from = models.PositiveIntegerField(
        help_text="the earliest version since which nothing measured changed: the cells it shares"
    )
    changes = models.JSONField(default=list, help_text="what changed from the version before, one phrase each")
    published_at = models.DateTimeField(null=True, blank=True, help_text="when it opened; null for a draft")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ("campaign", "version")
        constraints = (models.UniqueConstraint(fields=["campaign", "version"], name="campaign_version_unique"),)

    def __str__(self) -> str:
        return f"{self.campaign_id} v{self.version} ({self.state})"


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
    """One claim about a GGUF file (identified by the sha256 of its bytes): every submission keeps
    its own claim, so the first submitter of a file never names it for everyone. Identical claims
    share a row (keyed by `fingerprint`); claims whose facts (`facts_digest`) differ on the same
    sha256 are a conflict, which claims.py settles by standing."""

    fingerprint = models.CharField(max_length=64, unique=True, help_text="sha256 of the canonical claim")
    sha256 = models.CharField(max_length=64, db_index=True)
    file_name = models.CharField(max_length=255)
    architecture = models.CharField(max_length=200)
    n_params = models.BigIntegerField()
    file_type = models.CharField(max_length=32, db_index=True)
    size_bytes = models.BigIntegerField()
    tensor_bytes_by_type = models.JSONField(default=dict)
    expert_count = models.IntegerField(null=True, blank=True)
    expert_used_count = models.IntegerField(null=True, blank=True)
    label = models.CharField(max_length=200, blank=True)
    # sha256 of the canonical FACTS: what the file's bytes decide, not what its sender calls it
    # (file_name and label are free text and never conflict).
    facts_digest = models.CharField(max_length=64, db_index=True, default="")

    FACTS = (
        "sha256",
        "architecture",
        "n_params",
        "file_type",
        "size_bytes",
        "tensor_bytes_by_type",
        "expert_count",
        "expert_used_count",
    )

    def __str__(self) -> str:
        return self.label or self.file_name


class ModelClaimDecision(models.Model):
    """A moderator's pin of the claim about a file that stands, whatever the machines behind the
    others (claims.py); `name`, when set, is what the file's cells are called."""

    sha256 = models.CharField(max_length=64, unique=True)
    claim = models.ForeignKey(ModelFile, on_delete=models.PROTECT, related_name="+")
    name = models.CharField(max_length=200, blank=True, help_text="The file's name on every page; blank: the claim's.")
    decided_by = models.CharField(max_length=150)
    reason = models.TextField(blank=True)
    decided_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"{self.sha256[:12]}: {self.claim}"


class FileStanding(models.Model):
    """The last settled state of a disputed file's claims (claims.py): a refresh that finds it
    changed writes it and queues the file's other groups once."""

    sha256 = models.CharField(max_length=64, unique=True)
    established = models.CharField(max_length=64, blank=True, help_text="facts_digest of the claim that stands")
    disputed = models.BooleanField(default=False)
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"{self.sha256[:12]}: {self.established[:12] or 'none'}"


def time_ordered_uuid(at: datetime | None = None) -> uuid.UUID:
    """A version 7 UUID (RFC 9562): 48 bits of Unix milliseconds, then 74 random bits, so
    submissions sort by arrival. `at` numbers a submission received at another time (benchmarks)."""
    milliseconds = int((at or datetime.now(UTC)).timestamp() * 1000) & (2**48 - 1)
    random_bits = int.from_bytes(os.urandom(10), "big")
    value = milliseconds << 80 | 0x7 << 76 | (random_bits >> 62 & 0xFFF) << 64 | 0b10 << 62 | random_bits & (2**62 - 1)
    return uuid.UUID(int=value)


class SubmissionQuerySet(models.QuerySet["Submission"]):
    def public(self) -> SubmissionQuerySet:
        """What the site shows: everything but what a moderator hid (withdrawn ones say so)."""
        return self.filter(hidden=False)


class Submission(models.Model):
    class Status(models.TextChoices):
        ACCEPTED = "accepted"
        FLAGGED = "flagged"

    id = models.UUIDField(primary_key=True, default=time_ordered_uuid, editable=False)
    campaign = models.ForeignKey(Campaign, on_delete=models.PROTECT, related_name="submissions")
    contributor = models.ForeignKey(Contributor, on_delete=models.PROTECT, related_name="submissions")
    key = models.ForeignKey(PublicKey, on_delete=models.PROTECT, related_name="submissions", db_index=False)
    machine = models.ForeignKey(Machine, on_delete=models.PROTECT, related_name="submissions")
    model_file = models.ForeignKey(ModelFile, on_delete=models.PROTECT, related_name="submissions")
    nonce = models.CharField(max_length=32)
    payload_sha256 = models.CharField(max_length=64)
    measured_sha256 = models.CharField(
        max_length=64,
        help_text="sha256 of the measured rows (variant, rep, batch size, t/s): one measurement counts once",
    )
    # What copies.near_copy narrows by (the shape of the measured rows and the means of their log
    # rates) and then compares: the rows' values, read with the candidates in one indexed query.
    measured_shape = models.CharField(max_length=64, blank=True, default="", db_default="")
    measured_tg_log = models.FloatField(null=True, blank=True)
    measured_pp_log = models.FloatField(null=True, blank=True)
    measured_values = models.JSONField(
        null=True, blank=True, help_text="tg_tps, pp_tps of each measured row, rows in (variant, rep, batch size) order"
    )
    created_at = models.DateTimeField(help_text="When the agent assembled the result (its clock).")
    received_at = models.DateTimeField(auto_now_add=True, db_index=True)
    status = models.CharField(max_length=16, choices=Status.choices)
    flags = models.JSONField(default=list, help_text="Agent flags and server-derived flags, sorted.")
    hidden = models.BooleanField(default=False, help_text="Hidden by a moderator: left out of every cell.")
    released = models.BooleanField(
        default=False, help_text="A moderator let a quarantined or model-conflict submission into the cells."
    )
    moderation_reason = models.TextField(blank=True, help_text="Why a moderator hid or released it.")
    withdrawn_at = models.DateTimeField(null=True, blank=True, help_text="Withdrawn by its contributor.")
    withdrawal = models.BinaryField(null=True, editable=False, help_text="The signed withdrawal, byte for byte.")
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
    # Its cell group, copied from the machine and the model claim (both immutable).
    chip = models.CharField(max_length=200, default="")
    gpu_cores = models.PositiveIntegerField(null=True)
    model_sha256 = models.CharField(max_length=64, default="")
    backend = models.CharField(max_length=16, default="")
    quant = models.CharField(max_length=32, default="")
    model_held = models.BooleanField(
        default=False, help_text="Its model claim conflicts with another one on the same file (set by the refresh)."
    )
    ran_under = models.ForeignKey(
        CampaignVersion, on_delete=models.PROTECT, related_name="submissions", null=True, db_index=False
    )
    campaign_version = models.PositiveIntegerField(default=1, help_text="the measured_from of the version it ran under")

    objects = SubmissionQuerySet.as_manager()

    # Server flags a moderator must release before the submission counts.
    HELD_FLAGS = frozenset({"quarantined"})
    # How state_reason begins for a hidden row its contributor withdrew; the moderator's reason follows.
    WITHDRAWN_AFTER_HIDING = "withdrawn by its contributor; hidden by a moderator before: "

    class Meta:
        ordering = ("-received_at", "-id")
        constraints = (
            models.UniqueConstraint(fields=["key", "nonce"], name="submission_key_nonce_unique"),
            models.UniqueConstraint(fields=["payload_sha256"], name="submission_payload_unique"),
            models.UniqueConstraint(fields=["measured_sha256"], name="submission_measured_unique"),
        )
        indexes = (
            models.Index(fields=["cells_refreshed_at", "received_at"]),
            models.Index(fields=["chip", "quant", "-received_at", "-id"], name="submission_chip_quant_newest"),
            # Every claim about one model file, read by each refresh of its pages (claims.py).
            models.Index(fields=["measured_shape", "measured_tg_log"], name="submission_near_copy"),
            models.Index(fields=["model_sha256"], name="submission_model_file"),
        )

    def __str__(self) -> str:
        return str(self.id)

    @property
    def held_back(self) -> list[str]:
        """What keeps it out of the cells until a moderator decides (or, for a model conflict,
        until the claims resolve)."""
        held = [] if self.released else sorted(self.HELD_FLAGS.intersection(self.flags))
        return [*held, "model_conflict"] if self.model_held else held

    @property
    def state(self) -> str:
        """counted, hidden (a decision the payload cannot show: a moderator's, or a flag awaiting
        one) or withdrawn (by its contributor: in no cell at all)."""
        if self.withdrawn_at is not None:
            return "withdrawn"
        return "hidden" if self.hidden or self.held_back else "counted"

    @property
    def state_reason(self) -> str:
        """Why it is not counted; withdrawing a submission a moderator hid keeps why it was hidden."""
        if self.withdrawn_at is not None:
            if self.hidden:
                return self.WITHDRAWN_AFTER_HIDING + (self.moderation_reason or "no reason given")
            return "withdrawn by its contributor"
        if self.hidden:
            return self.moderation_reason or "hidden by a moderator"
        held = self.held_back
        return f"{', '.join(held)}: waiting for a moderator" if held else ""


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


class Measurement(models.Model):
    """One submission x variant x batch size: its round-paired numbers and whether its cell counts
    it (docs/protocol.md section 7). The cell group's facts are copied from the submission so that a group's
    refresh reads one indexed range."""

    class Excluded(models.TextChoices):
        NONE = "", "included"
        # Left out and counted in the cell's `excluded`, in the order the first applying one is chosen.
        HIDDEN = "hidden"
        WITHDRAWN = "withdrawn"
        HELD = "held"
        CORRECTNESS_FAILED = "correctness_failed"
        CORRECTNESS_NOT_RUN = "correctness_not_run"
        DEGENERATE_OUTPUT = "degenerate_output"
        RUN_STATE = "run_state"
        # Left out and counted nowhere: it measured something else, or too little.
        NONSTANDARD = "nonstandard_sweep"

    submission = models.ForeignKey(Submission, on_delete=models.CASCADE, related_name="measurements", db_index=False)
    variant = models.ForeignKey(SubmissionVariant, on_delete=models.CASCADE, related_name="measurements")
    campaign = models.ForeignKey(Campaign, on_delete=models.CASCADE, related_name="+", db_index=False)
    contributor = models.ForeignKey(Contributor, on_delete=models.CASCADE, related_name="+")
    key = models.ForeignKey(PublicKey, on_delete=models.CASCADE, related_name="+", null=True, help_text="the machine")
    chip = models.CharField(max_length=200)
    gpu_cores = models.PositiveIntegerField(null=True)
    model_sha256 = models.CharField(max_length=64)
    backend = models.CharField(max_length=16, default="")
    quant = models.CharField(max_length=32)
    variant_name = models.CharField(max_length=64)
    commit = models.CharField(max_length=40, default="", help_text="the commit the variant was built from")
    campaign_version = models.PositiveIntegerField(default=1)
    batch_size = models.PositiveIntegerField()
    n_rounds = models.PositiveSmallIntegerField(help_text="rounds in which variant and baseline both ran")
    tg_tps = models.FloatField(null=True, help_text="median over paired rounds")
    baseline_tg_tps = models.FloatField(null=True, help_text="the baseline's median over the same rounds")
    speedup = models.FloatField(null=True, help_text="median over whole cycles of the cycles' ratios")
    log_se = models.FloatField(null=True, help_text="standard error of log(speedup), from the cycles")
    se_df = models.PositiveSmallIntegerField(null=True, help_text="degrees of freedom of log_se")
    n_cycles = models.PositiveSmallIntegerField(null=True, help_text="whole rotation cycles behind speedup")
    correctness_status = models.CharField(max_length=8, help_text="pass, fail, not_run or missing")
    excluded_reason = models.CharField(max_length=32, choices=Excluded.choices, blank=True, default="")

    # The reasons a cell counts in `excluded` (docs/protocol.md, cells), in order of precedence.
    COUNTED_EXCLUSIONS = (
        "hidden",
        "withdrawn",
        "held",
        "correctness_failed",
        "correctness_not_run",
        "degenerate_output",
        "run_state",
    )

    class Meta:
        ordering = ("submission", "variant__position", "batch_size")
        constraints = (
            models.UniqueConstraint(fields=["submission", "variant_name", "batch_size"], name="measurement_unique"),
        )
        indexes = (
            models.Index(fields=["campaign", "chip", "gpu_cores", "model_sha256", "backend"], name="measurement_page"),
            models.Index(fields=["chip", "quant", "-id"], name="measurement_chip_quant_id"),
            # The measurements list of one group, newest first, reads one page of it, not the whole
            # group (56,700 rows of the busiest at a million submissions: 720 ms, then 0.5 ms). No
            # campaign column: the list filters on its slug, through a join the scan cannot lead with.
            models.Index(fields=["chip", "gpu_cores", "model_sha256", "-id"], name="measurement_group_newest"),
        )


class LeaderboardCell(models.Model):
    """The aggregate of docs/protocol.md section 7 for one (campaign, chip, gpu_cores, model, variant,
    batch size); a group's cells are recomputed together from its measurements (cells.py)."""

    campaign = models.ForeignKey(Campaign, on_delete=models.CASCADE, related_name="cells", db_index=False)
    chip = models.CharField(max_length=200)
    gpu_cores = models.PositiveIntegerField(null=True)
    model_sha256 = models.CharField(max_length=64)
    backend = models.CharField(max_length=16, default="")
    variant = models.CharField(max_length=64)
    commit = models.CharField(max_length=40, default="")
    batch_size = models.PositiveIntegerField()
    model = models.CharField(max_length=255, help_text="the model's label, else its file name")
    quant = models.CharField(max_length=32)
    baseline_tg_tps = models.FloatField(null=True)
    tg_tps = models.FloatField(null=True)
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
    min_effect = models.FloatField(default=DEFAULT_MIN_EFFECT)
    control = models.BooleanField(default=False, help_text="measured on a backend the campaign's patches do not touch")
    n_machines = models.PositiveIntegerField(default=0)
    n_submissions = models.PositiveIntegerField(default=0)
    n_contributors = models.PositiveIntegerField(default=0)
    n_pending = models.PositiveIntegerField(default=0, help_text="machines whose keys are still on probation")
    excluded = models.JSONField(default=dict, help_text="rows left out, by reason")
    campaign_version = models.PositiveIntegerField(
        default=1, help_text="the campaign version whose measurement it holds"
    )
    superseded = models.BooleanField(default=False, help_text="a newer version measures something else: never ranked")
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ("campaign", "chip", "gpu_cores", "model", "batch_size", "variant")
        constraints = (
            # gpu_cores is null off Apple GPUs; Coalesce makes two nulls collide, on PostgreSQL and SQLite.
            models.UniqueConstraint(
                F("campaign"),
                F("chip"),
                Coalesce("gpu_cores", -1),
                F("model_sha256"),
                F("backend"),
                F("variant"),
                F("commit"),
                F("batch_size"),
                F("campaign_version"),
                name="leaderboard_cell_unique",
            ),
        )

    def __str__(self) -> str:
        return f"{self.chip}/{self.gpu_cores}/{self.model}/{self.variant}/BS{self.batch_size}"


class CellGroup(models.Model):
    """The cells of one (campaign, chip, gpu_cores, model file): what one submission touches, and
    what one refresh recomputes. Its row is the group's lock (cells.refresh_group)."""

    campaign = models.ForeignKey(Campaign, on_delete=models.CASCADE, related_name="+", db_index=False)
    chip = models.CharField(max_length=200)
    gpu_cores = models.PositiveIntegerField(null=True)
    model_sha256 = models.CharField(max_length=64)
    backend = models.CharField(max_length=16, default="")
    campaign_version = models.PositiveIntegerField(default=1)
    refreshed_at = models.DateTimeField(null=True)

    class Meta:
        constraints = (
            models.UniqueConstraint(
                F("campaign"),
                F("chip"),
                Coalesce("gpu_cores", -1),
                F("model_sha256"),
                F("backend"),
                F("campaign_version"),
                name="cell_group_unique",
            ),
        )


class Headline(models.Model):
    """The ranking's headline of one variant in one group: per machine, the geometric mean of its
    speedups over the campaign's batch sizes 2-8 (where speculative decoding's verify steps fall);
    then the median over machines with an interval that says what it is, as a cell's. Recomputed
    with the group's cells."""

    campaign = models.ForeignKey(Campaign, on_delete=models.CASCADE, related_name="+", db_index=False)
    chip = models.CharField(max_length=200)
    gpu_cores = models.PositiveIntegerField(null=True)
    model_sha256 = models.CharField(max_length=64)
    backend = models.CharField(max_length=16, default="")
    variant = models.CharField(max_length=64)
    commit = models.CharField(max_length=40, default="")
    batch_sizes = models.JSONField(help_text="the batch sizes every counted machine measured")
    speedup = models.FloatField(null=True)
    interval = models.CharField(max_length=32, null=True)
    ci_low = models.FloatField(null=True)
    ci_high = models.FloatField(null=True)
    predict_low = models.FloatField(null=True)
    predict_high = models.FloatField(null=True)
    predict_level = models.FloatField(null=True)
    tau = models.FloatField(null=True, help_text="spread of true effects between machines (log scale sd)")
    i2 = models.FloatField(null=True, help_text="share of the machines' spread that is between machines")
    verdict = models.CharField(max_length=20)
    control = models.BooleanField(default=False)
    n_machines = models.PositiveIntegerField(default=0)
    campaign_version = models.PositiveIntegerField(default=1)
    superseded = models.BooleanField(default=False)

    class Meta:
        constraints = (
            models.UniqueConstraint(
                F("campaign"),
                F("chip"),
                Coalesce("gpu_cores", -1),
                F("model_sha256"),
                F("backend"),
                F("variant"),
                F("commit"),
                F("campaign_version"),
                name="headline_unique",
            ),
        )
