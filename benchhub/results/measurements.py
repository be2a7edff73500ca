"""A submission's Measurement rows, derived from its payload and its state: the one place that
decides what a cell counts (docs/protocol.md section 7). Ingest derives them from the payload in hand;
moderation, withdrawal and `rederive_measurements` derive them again from the stored raw envelope."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from typing import Any

from benchhub_protocol import cycles
from django.db import transaction

from benchhub.results import flags, storage
from benchhub.results.models import Measurement, Submission, SubmissionVariant

Excluded = Measurement.Excluded


def correctness_status(statuses: Iterable[str]) -> str:
    present = set(statuses)
    for status in ("fail", "pass", "not_run"):
        if status in present:
            return status
    return "missing"


def exclusion(
    submission: Submission, correctness: str, degenerate: set[str], baseline_degenerate: set[str], n_rounds: int
) -> str:
    """Why a row is left out of its cell ('' when it counts): the first that applies, in the order
    of docs/protocol.md (cells). A model conflict is decided at refresh time (claims.py)."""
    if flags.NONSTANDARD_SWEEP in submission.flags or n_rounds < flags.MIN_ROUNDS:
        return Excluded.NONSTANDARD.value
    if submission.hidden:
        return Excluded.HIDDEN.value
    if submission.withdrawn_at is not None:
        return Excluded.WITHDRAWN.value
    if not submission.released and Submission.HELD_FLAGS.intersection(submission.flags):
        return Excluded.HELD.value
    if correctness == "fail":
        return Excluded.CORRECTNESS_FAILED.value
    if correctness != "pass":
        return Excluded.CORRECTNESS_NOT_RUN.value
    if degenerate - baseline_degenerate:
        return Excluded.DEGENERATE_OUTPUT.value
    if flags.RUN_STATE_FLAGS.intersection(submission.flags):
        return Excluded.RUN_STATE.value
    return Excluded.NONE.value


def stored_variants(submission: Submission) -> dict[str, SubmissionVariant]:
    return {variant.name: variant for variant in submission.variants.all()}


def measurement_rows(
    submission: Submission, payload: dict[str, Any], variants: Mapping[str, SubmissionVariant]
) -> list[Measurement]:
    """Unsaved rows, one per variant and batch size with at least one paired round; `variants` are
    the submission's stored variants by name. The speedup is the estimate over whole cycles
    (cycles.submission_estimates, as the agent prints it); a row without a whole cycle counts nowhere."""
    statuses: dict[str, list[str]] = defaultdict(list)
    for check in payload["correctness"]:
        statuses[check["variant"]].append(check["status"])
    degenerate: dict[str, set[str]] = defaultdict(set)
    for check in payload["generation"]:
        if check["degenerate"]:
            degenerate[check["variant"]].add(check["prompt_id"])
    baseline = payload["variants"][0]["name"]
    estimates = cycles.submission_estimates(payload["sweep"]["runs"], baseline)
    rows = []
    for (name, batch_size), numbers in sorted(flags.paired_numbers(payload).items()):
        correctness = correctness_status(statuses[name])
        found = estimates.get((name, batch_size))
        reason = exclusion(
            submission,
            correctness,
            set() if name == baseline else degenerate[name],
            degenerate[baseline],
            numbers.n_rounds,
        )
        rows.append(
            Measurement(
                submission=submission,
                variant=variants[name],
                campaign_id=submission.campaign_id,
                contributor_id=submission.contributor_id,
                key_id=submission.key_id,
                chip=submission.chip,
                gpu_cores=submission.gpu_cores,
                model_sha256=submission.model_sha256,
                backend=submission.backend,
                quant=submission.quant,
                variant_name=name,
                commit=variants[name].commit,
                campaign_version=submission.campaign_version,
                batch_size=batch_size,
                n_rounds=numbers.n_rounds,
                tg_tps=numbers.tg_tps,
                baseline_tg_tps=numbers.baseline_tg_tps,
                speedup=found.ratio if found else None,
                log_se=found.log_se if found else None,
                se_df=found.df if found else None,
                n_cycles=found.n_cycles if found else None,
                correctness_status=correctness,
                excluded_reason=reason if found else Excluded.NONSTANDARD.value,
            )
        )
    return rows


@transaction.atomic
def rebuild_measurements(submission: Submission) -> list[Measurement]:
    """Replace the submission's measurements from its stored envelope (after its state changed)."""
    submission.measurements.all().delete()
    payload = storage.stored_payload(bytes(submission.raw.body))
    return Measurement.objects.bulk_create(measurement_rows(submission, payload, stored_variants(submission)))
