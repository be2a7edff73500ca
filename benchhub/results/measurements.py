"""Derive a submission's Measurement rows from its sweep, correctness and generation facts.

One place decides what is paired with what and what is excluded (PROTOCOL.md section 5):
hidden submissions, submissions swept with settings other than their campaign's (flagged
`nonstandard_sweep` at ingest), variants whose correctness status is `fail`, and variants that
produced degenerate output on a prompt where the baseline did not. The facts come either straight from
the payload being ingested or rebuilt (no read-back) or from the stored rows (moderation).
`measurement_fields` gives plain column values, which the ORM path and the COPY path of
`rebuild_cells` (results/bulk.py) both write.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from django.db import connection, transaction

from benchhub.results import cell_keys, flags, stats
from benchhub.results.models import Measurement, Submission

# variant name -> batch size -> tg_tps of each rep
Samples = dict[str, dict[int, list[float]]]


@dataclass(frozen=True)
class SubmissionFacts:
    """What the rules and the denormalised cell key read of a submission."""

    hidden: bool
    flags: Sequence[str]
    campaign_id: int
    contributor_id: int
    chip: str
    gpu_cores: int | None
    quant: str

    @classmethod
    def of(cls, submission: Submission) -> SubmissionFacts:
        machine, model_file = submission.machine, submission.model_file
        return cls(
            submission.hidden,
            submission.flags,
            submission.campaign_id,
            submission.contributor_id,
            machine.chip,
            machine.gpu_cores,
            model_file.file_type,
        )


@dataclass(frozen=True)
class VariantFacts:
    name: str
    correctness: str  # pass, fail, not_run or missing
    degenerate_prompts: frozenset[str]


def correctness_status(statuses: Iterable[str]) -> str:
    present = set(statuses)
    for status in ("fail", "pass", "not_run"):
        if status in present:
            return status
    return "missing"


def exclusion_reason(submission: SubmissionFacts, variant: VariantFacts, baseline: VariantFacts) -> str:
    if submission.hidden:
        return Measurement.Excluded.HIDDEN.value
    if flags.NONSTANDARD_SWEEP in submission.flags:
        return Measurement.Excluded.NONSTANDARD_SWEEP.value
    if variant.correctness == "fail":
        return Measurement.Excluded.CORRECTNESS_FAILED.value
    if variant.degenerate_prompts - baseline.degenerate_prompts:
        return Measurement.Excluded.DEGENERATE_OUTPUT.value
    return Measurement.Excluded.NONE.value


def measurement_fields(
    submission: SubmissionFacts, variants: list[VariantFacts], samples: Samples
) -> list[dict[str, Any]]:
    """The column values of each Measurement row but its submission and variant keys (the variant
    is named by `variant_name`). `variants` in position order, the baseline first."""
    baseline = variants[0]
    medians = {
        name: {batch_size: stats.median(values) for batch_size, values in by_size.items() if values}
        for name, by_size in samples.items()
    }
    baseline_medians = medians.get(baseline.name, {})
    rows = []
    for variant in variants:
        reason = exclusion_reason(submission, variant, baseline)
        for batch_size, values in sorted(samples.get(variant.name, {}).items()):
            tg_tps = medians[variant.name][batch_size]
            baseline_tg = baseline_medians.get(batch_size)
            rows.append(
                {
                    "campaign_id": submission.campaign_id,
                    "contributor_id": submission.contributor_id,
                    "chip": submission.chip,
                    "gpu_cores": submission.gpu_cores,
                    "quant": submission.quant,
                    "variant_name": variant.name,
                    "batch_size": batch_size,
                    "tg_tps": tg_tps,
                    "baseline_tg_tps": baseline_tg,
                    "speedup": stats.paired_speedup(tg_tps, baseline_tg) if baseline_tg is not None else None,
                    "spread": stats.spread(values, tg_tps),
                    "n_reps": len(values),
                    "correctness_status": variant.correctness,
                    "excluded_reason": reason,
                }
            )
    return rows


def build_measurements(submission: Submission) -> list[Measurement]:
    """From the stored rows."""
    variants = list(submission.variants.prefetch_related("correctness", "generation").order_by("position"))
    facts = [
        VariantFacts(
            variant.name,
            correctness_status(check.status for check in variant.correctness.all()),
            frozenset(check.prompt_id for check in variant.generation.all() if check.degenerate),
        )
        for variant in variants
    ]
    names = {variant.pk: variant.name for variant in variants}
    samples: Samples = defaultdict(lambda: defaultdict(list))
    for run in submission.sweep_runs.prefetch_related("rows"):
        for row in run.rows.all():
            samples[names[run.variant_id]][row.batch_size].append(row.tg_tps)
    by_name = {variant.name: variant for variant in variants}
    rows = measurement_fields(SubmissionFacts.of(submission), facts, samples)
    with connection.cursor() as cursor:
        cell_keys.number_rows(cursor, rows)
    return [Measurement(submission=submission, variant=by_name[fields["variant_name"]], **fields) for fields in rows]


@transaction.atomic
def rebuild_measurements(submission: Submission) -> list[Measurement]:
    """Replace the submission's measurements; safe to repeat (hide, unhide, rebuild_cells)."""
    submission.measurements.all().delete()
    return Measurement.objects.bulk_create(build_measurements(submission))
