"""Published reference rows: decode measurements from elsewhere (baseline → variant at one batch
size), shown beside the crowd's cells on the pages and served by the API. They are never read by
the aggregation, so they can never leak into crowd medians."""

from __future__ import annotations

from django.db import models


class ReferenceRowQuerySet(models.QuerySet["ReferenceRow"]):
    def for_campaign(self, slug: str) -> ReferenceRowQuerySet:
        return self.filter(campaign_slug=slug)

    def for_chip(self, chip: str, gpu_cores: int | None) -> ReferenceRowQuerySet:
        # A published row that did not state its GPU core count is shown on every binning of its chip.
        return self.filter(chip=chip).filter(models.Q(gpu_cores=gpu_cores) | models.Q(gpu_cores__isnull=True))


class ReferenceRow(models.Model):
    """One published decode measurement (baseline → variant at one batch size): not signed by
    anyone benchhub knows, so it is labelled "published, not signed" wherever it shows."""

    # No index of its own: the unique constraint and the (campaign_slug, chip) index lead with it.
    campaign_slug = models.SlugField(max_length=64, db_index=False)
    chip = models.CharField(max_length=100)
    gpu_cores = models.PositiveIntegerField(null=True, blank=True)
    machine_label = models.CharField(max_length=100)
    model_label = models.CharField(max_length=200)
    quant = models.CharField(max_length=32)
    baseline_variant = models.CharField(max_length=64)
    variant = models.CharField(max_length=64)
    batch_size = models.PositiveIntegerField()
    baseline_tg_tps = models.FloatField()
    tg_tps = models.FloatField()
    source = models.CharField(max_length=200)
    source_url = models.URLField(blank=True)
    method = models.TextField(blank=True)

    objects = ReferenceRowQuerySet.as_manager()

    class Meta:
        db_table = "web_referencerow"  # the table the web app created before the rows moved here
        ordering = ("campaign_slug", "chip", "model_label", "variant", "batch_size")
        constraints = (
            models.UniqueConstraint(
                fields=["campaign_slug", "machine_label", "model_label", "variant", "batch_size"],
                name="reference_row_unique_measurement",
            ),
            models.CheckConstraint(
                condition=models.Q(baseline_tg_tps__gt=0) & models.Q(tg_tps__gt=0),
                name="reference_row_positive_throughput",
            ),
        )
        indexes = (models.Index(fields=["campaign_slug", "chip"], name="web_referen_campaig_a2636a_idx"),)

    def __str__(self) -> str:
        return f"{self.machine_label} {self.model_label} BS{self.batch_size} (published)"

    @property
    def speedup(self) -> float:
        return self.tg_tps / self.baseline_tg_tps
