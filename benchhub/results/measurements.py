"""Derive a submission's Measurement rows from its sweep, correctness and generation facts.

One place decides what is paired with what and what is excluded (PROTOCOL.md section 5):
hidden submissions, submissions swept with settings other than their campaign's (flagged
`nonstandard_sweep` at ingest), variants whose correctness status is `fail`, and variants that
produced degenerate output on a prompt where the baseline did not. The facts come either straight from
the payload being ingested (no read-back) or from the stored rows (moderation, rebuilds).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

from django.db import transaction

from benchhub.results import flags, stats
from benchhub.results.models import Measurement, Submission, SubmissionVariant

# variant name -> batch size -> tg_tps of each rep
Samples = dict[str, dict[int, list[float]]]


@dataclass(frozen=True)
class VariantFacts:
    row: SubmissionVariant
    correctness: str  # pass, fail, not_run or missing
    degenerate_prompts: frozenset[str]


def correctness_status(statuses: Iterable[str]) -> str:
    present = set(statuses)
    for status in ("fail", "pass", "not_run"):
        if status in present:
            return status
    return "missing"


def exclusion_reason(submission: Submission, variant: VariantFacts, baseline: VariantFacts) -> str:
    if submission.hidden:
        return Measurement.Excluded.HIDDEN
    if flags.NONSTANDARD_SWEEP in submission.flags:
        return Measurement.Excluded.NONSTANDARD_SWEEP
    if variant.correctness == "fail":
        return Measurement.Excluded.CORRECTNESS_FAILED
    if variant.degenerate_prompts - baseline.degenerate_prompts:
        return Measurement.Excluded.DEGENERATE_OUTPUT
    return Measurement.Excluded.NONE


def derive(submission: Submission, variants: list[VariantFacts], samples: Samples) -> list[Measurement]:
    """`variants` in position order, the baseline first."""
    baseline = variants[0]
    baseline_samples = samples.get(baseline.row.name, {})
    machine, model_file = submission.machine, submission.model_file
    measurements = []
    for variant in variants:
        reason = exclusion_reason(submission, variant, baseline)
        for batch_size, values in sorted(samples.get(variant.row.name, {}).items()):
            tg_tps = stats.median(values)
            baseline_values = baseline_samples.get(batch_size)
            baseline_tg = stats.median(baseline_values) if baseline_values else None
            measurements.append(
                Measurement(
                    submission=submission,
                    variant=variant.row,
                    campaign_id=submission.campaign_id,
                    contributor_id=submission.contributor_id,
                    chip=machine.chip,
                    gpu_cores=machine.gpu_cores,
                    quant=model_file.file_type,
                    variant_name=variant.row.name,
                    batch_size=batch_size,
                    tg_tps=tg_tps,
                    baseline_tg_tps=baseline_tg,
                    speedup=stats.paired_speedup(tg_tps, baseline_tg) if baseline_tg is not None else None,
                    spread=stats.spread(values),
                    n_reps=len(values),
                    correctness_status=variant.correctness,
                    excluded_reason=reason,
                )
            )
    return measurements


def build_measurements(submission: Submission) -> list[Measurement]:
    """From the stored rows."""
    variants = [
        VariantFacts(
            variant,
            correctness_status(check.status for check in variant.correctness.all()),
            frozenset(check.prompt_id for check in variant.generation.all() if check.degenerate),
        )
        for variant in submission.variants.prefetch_related("correctness", "generation").order_by("position")
    ]
    names = {variant.row.pk: variant.row.name for variant in variants}
    samples: Samples = defaultdict(lambda: defaultdict(list))
    for run in submission.sweep_runs.prefetch_related("rows"):
        for row in run.rows.all():
            samples[names[run.variant_id]][row.batch_size].append(row.tg_tps)
    return derive(submission, variants, samples)


@transaction.atomic
def rebuild_measurements(submission: Submission) -> list[Measurement]:
    """Replace the submission's measurements; safe to repeat (hide, unhide, rebuild_cells)."""
    submission.measurements.all().delete()
    return Measurement.objects.bulk_create(build_measurements(submission))
