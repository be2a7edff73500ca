"""What a submission ran on and what it ran: its machine, and the claims about its model file with
how a dispute over them is settled (claims.py)."""

from __future__ import annotations

from django.db import models


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
