"""Derive a submission's Measurement rows from its stored sweep, correctness and generation rows.

One place decides what is paired with what and what is excluded (PROTOCOL.md section 5):
hidden submissions, variants whose correctness status is `fail`, and variants that produced
degenerate output on a prompt where the baseline did not.
"""

from __future__ import annotations

from collections import defaultdict

from django.db import transaction

from benchhub.results import stats
from benchhub.results.models import Measurement, Submission, SubmissionVariant


def _tg_by_variant_and_batch(submission: Submission) -> dict[int, dict[int, list[float]]]:
    samples: dict[int, dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
    for run in submission.sweep_runs.prefetch_related("rows"):
        for row in run.rows.all():
            samples[run.variant_id][row.batch_size].append(row.tg_tps)
    return samples


def _correctness_status(variant: SubmissionVariant) -> str:
    statuses = {check.status for check in variant.correctness.all()}
    for status in ("fail", "pass", "not_run"):
        if status in statuses:
            return status
    return "missing"


def _degenerate_prompts(variant: SubmissionVariant) -> set[str]:
    return {check.prompt_id for check in variant.generation.all() if check.degenerate}


def exclusion_reason(submission: Submission, variant: SubmissionVariant, baseline: SubmissionVariant) -> str:
    if submission.hidden:
        return Measurement.Excluded.HIDDEN
    if _correctness_status(variant) == "fail":
        return Measurement.Excluded.CORRECTNESS_FAILED
    if _degenerate_prompts(variant) - _degenerate_prompts(baseline):
        return Measurement.Excluded.DEGENERATE_OUTPUT
    return Measurement.Excluded.NONE


def build_measurements(submission: Submission) -> list[Measurement]:
    variants = list(submission.variants.prefetch_related("correctness", "generation").order_by("position"))
    baseline = variants[0]
    samples = _tg_by_variant_and_batch(submission)
    machine, model_file = submission.machine, submission.model_file
    measurements = []
    for variant in variants:
        reason = exclusion_reason(submission, variant, baseline)
        correctness = _correctness_status(variant)
        for batch_size, values in sorted(samples[variant.pk].items()):
            tg_tps = stats.median(values)
            baseline_values = samples[baseline.pk].get(batch_size)
            baseline_tg = stats.median(baseline_values) if baseline_values else None
            measurements.append(
                Measurement(
                    submission=submission,
                    variant=variant,
                    campaign_id=submission.campaign_id,
                    contributor_id=submission.contributor_id,
                    chip=machine.chip,
                    gpu_cores=machine.gpu_cores,
                    quant=model_file.file_type,
                    variant_name=variant.name,
                    batch_size=batch_size,
                    tg_tps=tg_tps,
                    baseline_tg_tps=baseline_tg,
                    speedup=stats.paired_speedup(tg_tps, baseline_tg) if baseline_tg is not None else None,
                    spread=stats.spread(values),
                    n_reps=len(values),
                    correctness_status=correctness,
                    excluded_reason=reason,
                )
            )
    return measurements


@transaction.atomic
def rebuild_measurements(submission: Submission) -> list[Measurement]:
    """Replace the submission's measurements; safe to repeat (hide, unhide, rebuild_cells)."""
    submission.measurements.all().delete()
    return Measurement.objects.bulk_create(build_measurements(submission))
