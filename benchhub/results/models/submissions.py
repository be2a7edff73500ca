"""What was received, kept as it came (RawEnvelope, immutable), the rows parsed from it, and the
measurements derived from those (rebuilt by `manage.py rederive_measurements`)."""

from __future__ import annotations

import os
import uuid
from datetime import UTC, datetime
from typing import Any

from django.db import models

from benchhub.accounts.models import Contributor, PublicKey
from benchhub.results.models.campaigns import Campaign, CampaignVersion
from benchhub.results.models.machines import Machine, ModelFile


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
