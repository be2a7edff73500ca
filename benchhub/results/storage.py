"""Normalised rows of a submission, written from its payload: at ingest, and again by
`rebuild_cells` from the stored raw envelope (the one source of truth)."""

from __future__ import annotations

import hashlib
import logging
from collections import defaultdict
from typing import Any

from benchhub_agent import envelope

from benchhub.results import measurements
from benchhub.results.models import (
    CorrectnessCheck,
    GenerationCheck,
    Machine,
    Measurement,
    ModelFile,
    Submission,
    SubmissionVariant,
    SweepRow,
    SweepRun,
)

logger = logging.getLogger(__name__)

MACHINE_IDENTITY = (
    "os",
    "os_version",
    "os_build",
    "arch",
    "chip",
    "cpu_cores_performance",
    "cpu_cores_efficiency",
    "gpu_name",
    "gpu_cores",
    "memory_bytes",
    "backend",
)


def machine_row(machine: dict[str, Any]) -> Machine:
    facts = {name: machine.get(name, "" if name == "os_build" else None) for name in MACHINE_IDENTITY}
    fingerprint = hashlib.sha256(envelope.canonical_bytes(facts)).hexdigest()
    row, _ = Machine.objects.get_or_create(fingerprint=fingerprint, defaults=facts)
    return row


def model_file_row(model: dict[str, Any]) -> ModelFile:
    row, _ = ModelFile.objects.get_or_create(
        sha256=model["sha256"],
        defaults={
            "file_name": model["file_name"],
            "architecture": model["architecture"],
            "n_params": model["n_params"],
            "file_type": model["file_type"],
            "size_bytes": model["size_bytes"],
            "tensor_bytes_by_type": model["tensor_bytes_by_type"],
            "label": model.get("label", ""),
        },
    )
    return row


def store_rows(submission: Submission, payload: dict[str, Any]) -> None:
    store_many([(submission, payload)])


def store_many(received: list[tuple[Submission, dict[str, Any]]]) -> None:
    """Variants, sweep runs and rows, checks, then the derived measurements of every submission
    given: one INSERT per table for all of them (ingest passes one, rebuilds pass hundreds), and the
    measurements derived from the payloads in hand rather than read back."""
    variants = SubmissionVariant.objects.bulk_create(
        SubmissionVariant(
            submission=submission,
            position=position,
            name=variant["name"],
            commit=variant["commit"],
            patches=variant["patches"],
            env=variant["env"],
        )
        for submission, payload in received
        for position, variant in enumerate(payload["variants"])
    )
    by_name = {(variant.submission_id, variant.name): variant for variant in variants}
    runs = [(submission, run) for submission, payload in received for run in payload["sweep"]["runs"]]
    sweep_runs = SweepRun.objects.bulk_create(
        SweepRun(
            submission=submission,
            variant=by_name[(submission.pk, run["variant"])],
            rep=run["rep"],
            seq=run["seq"],
            exit_code=run["exit_code"],
        )
        for submission, run in runs
    )
    SweepRow.objects.bulk_create(
        SweepRow(run=sweep_run, **row)
        for sweep_run, (_, run) in zip(sweep_runs, runs, strict=True)
        for row in run["rows"]
    )
    CorrectnessCheck.objects.bulk_create(
        CorrectnessCheck(
            submission=submission,
            variant=by_name[(submission.pk, check["variant"])],
            tool=check["tool"],
            op=check["op"],
            backend=check["backend"],
            status=check["status"],
            passed=check["passed"],
            failed=check["failed"],
            reason=check.get("reason", ""),
        )
        for submission, payload in received
        for check in payload["correctness"]
    )
    GenerationCheck.objects.bulk_create(
        GenerationCheck(
            submission=submission,
            variant=by_name[(submission.pk, check["variant"])],
            **{name: value for name, value in check.items() if name != "variant"},
        )
        for submission, payload in received
        for check in payload["generation"]
    )
    Measurement.objects.bulk_create(
        measurement
        for submission, payload in received
        for measurement in measurements.derive(
            submission,
            _variant_facts([by_name[(submission.pk, v["name"])] for v in payload["variants"]], payload),
            _samples(payload["sweep"]["runs"]),
        )
    )


def _variant_facts(variants: list[SubmissionVariant], payload: dict[str, Any]) -> list[measurements.VariantFacts]:
    statuses: dict[str, list[str]] = defaultdict(list)
    for check in payload["correctness"]:
        statuses[check["variant"]].append(check["status"])
    degenerate: dict[str, set[str]] = defaultdict(set)
    for check in payload["generation"]:
        if check["degenerate"]:
            degenerate[check["variant"]].add(check["prompt_id"])
    return [
        measurements.VariantFacts(
            variant, measurements.correctness_status(statuses[variant.name]), frozenset(degenerate[variant.name])
        )
        for variant in variants
    ]


def _samples(runs: list[dict[str, Any]]) -> measurements.Samples:
    samples: measurements.Samples = defaultdict(lambda: defaultdict(list))
    for run in runs:
        for row in run["rows"]:
            samples[run["variant"]][row["batch_size"]].append(row["tg_tps"])
    return samples


def stored_payload(body: bytes) -> dict[str, Any]:
    """The payload inside a stored raw envelope. Its signature and canonical form were checked when
    it was received and the row is immutable, so a rebuild parses it without repeating the
    canonical re-serialisation (2-3 ms a submission)."""
    opened = envelope.open_envelope(envelope.strict_loads(body), envelope.SUBMISSION_TYPE)
    payload = envelope.strict_loads(opened.payload)
    if not isinstance(payload, dict):
        raise envelope.EnvelopeError("bad_payload", "Payload must be a JSON object.", "payload")
    return payload


def queue_cell_refresh(submission_id: str) -> None:
    """Best effort: if the broker is down the submission stays unrefreshed and the sweeper retries."""
    from benchhub.results.tasks import refresh_cells_for_submission

    try:
        refresh_cells_for_submission.delay(submission_id)
    except Exception:  # the broker's errors vary by transport; losing the enqueue is recoverable
        logger.exception("could not queue the cell refresh of submission %s", submission_id)
