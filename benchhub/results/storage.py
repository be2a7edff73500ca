"""Normalised rows of a submission, written from its payload: at ingest, and again by
`rebuild_cells` from the stored raw envelope (the one source of truth)."""

from __future__ import annotations

import hashlib
import json
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from benchhub_agent import envelope
from django.db import connection

from benchhub.results import cell_keys, measurements
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
    """The ingest's write of one submission's normalised rows: COPY on PostgreSQL (the whole ingest
    then costs ~30% less CPU than with model instances and INSERTs, docs/performance.md), the ORM
    elsewhere."""
    if connection.vendor != "postgresql":
        store_many([(submission, payload)])
        return
    from benchhub.results import bulk  # bulk builds on this module

    with connection.cursor() as wrapper:
        rows = normalised_rows(measurements.SubmissionFacts.of(submission), payload)
        bulk.write_rows(wrapper.cursor, [(submission.pk, rows)])


@dataclass(frozen=True)
class NormalisedRows:
    """A submission's normalised rows as column values, before the database gives them ids:
    children name their variant, and each sweep run carries its rows. The one derivation of
    these rows from a payload, written by the ORM (`store_many`) and by COPY (results/bulk.py)."""

    variants: list[dict[str, Any]]  # in position order
    runs: list[tuple[str, dict[str, Any], list[dict[str, Any]]]]  # (variant, run, its sweep rows)
    correctness: list[tuple[str, dict[str, Any]]]  # (variant, check)
    generation: list[tuple[str, dict[str, Any]]]  # (variant, check)
    measurements: list[dict[str, Any]]  # each names its variant in variant_name


def normalised_rows(submission: measurements.SubmissionFacts, payload: dict[str, Any]) -> NormalisedRows:
    return NormalisedRows(
        variants=[
            {
                "position": position,
                "name": variant["name"],
                "commit": variant["commit"],
                "patches": variant["patches"],
                "env": variant["env"],
            }
            for position, variant in enumerate(payload["variants"])
        ],
        runs=[
            (
                run["variant"],
                {"rep": run["rep"], "seq": run["seq"], "exit_code": run["exit_code"]},
                [
                    {
                        "batch_size": row["batch_size"],
                        "pp_tps": row["pp_tps"],
                        "tg_tps": row["tg_tps"],
                        "t_pp_s": row["t_pp_s"],
                        "t_tg_s": row["t_tg_s"],
                    }
                    for row in run["rows"]
                ],
            )
            for run in payload["sweep"]["runs"]
        ],
        correctness=[
            (
                check["variant"],
                {
                    "tool": check["tool"],
                    "op": check["op"],
                    "backend": check["backend"],
                    "status": check["status"],
                    "passed": check["passed"],
                    "failed": check["failed"],
                    "reason": check.get("reason", ""),
                },
            )
            for check in payload["correctness"]
        ],
        generation=[
            (
                check["variant"],
                {
                    "prompt_id": check["prompt_id"],
                    "n_tokens": check["n_tokens"],
                    "output_sha256": check["output_sha256"],
                    "degenerate": check["degenerate"],
                    "repetition_score": check["repetition_score"],
                    "identical_to_baseline": check["identical_to_baseline"],
                },
            )
            for check in payload["generation"]
        ],
        measurements=measurement_rows(submission, payload),
    )


def measurement_rows(submission: measurements.SubmissionFacts, payload: dict[str, Any]) -> list[dict[str, Any]]:
    """The measurement rows of a payload (NormalisedRows.measurements), each naming its variant."""
    return measurements.measurement_fields(submission, _variant_facts(payload), _samples(payload["sweep"]["runs"]))


def store_many(received: list[tuple[Submission, dict[str, Any]]]) -> None:
    """The normalised rows of every submission given, through the ORM: one INSERT per table for
    all of them (ingest passes one, a rebuild on SQLite hundreds), the measurements derived from
    the payloads in hand rather than read back."""
    rows = [
        (submission, normalised_rows(measurements.SubmissionFacts.of(submission), payload))
        for submission, payload in received
    ]
    variants = SubmissionVariant.objects.bulk_create(
        SubmissionVariant(submission=submission, **fields)
        for submission, normalised in rows
        for fields in normalised.variants
    )
    by_name = {(variant.submission_id, variant.name): variant for variant in variants}
    runs = [(submission, *run) for submission, normalised in rows for run in normalised.runs]
    sweep_runs = SweepRun.objects.bulk_create(
        SweepRun(submission=submission, variant=by_name[(submission.pk, variant)], **fields)
        for submission, variant, fields, _ in runs
    )
    SweepRow.objects.bulk_create(
        SweepRow(run=sweep_run, **fields)
        for sweep_run, (*_, sweep_rows) in zip(sweep_runs, runs, strict=True)
        for fields in sweep_rows
    )
    CorrectnessCheck.objects.bulk_create(
        CorrectnessCheck(submission=submission, variant=by_name[(submission.pk, variant)], **fields)
        for submission, normalised in rows
        for variant, fields in normalised.correctness
    )
    GenerationCheck.objects.bulk_create(
        GenerationCheck(submission=submission, variant=by_name[(submission.pk, variant)], **fields)
        for submission, normalised in rows
        for variant, fields in normalised.generation
    )
    with connection.cursor() as cursor:
        cell_keys.number_rows(cursor, [fields for _, normalised in rows for fields in normalised.measurements])
    Measurement.objects.bulk_create(
        Measurement(submission=submission, variant=by_name[(submission.pk, fields["variant_name"])], **fields)
        for submission, normalised in rows
        for fields in normalised.measurements
    )


def _variant_facts(payload: dict[str, Any]) -> list[measurements.VariantFacts]:
    statuses: dict[str, list[str]] = defaultdict(list)
    for check in payload["correctness"]:
        statuses[check["variant"]].append(check["status"])
    degenerate: dict[str, set[str]] = defaultdict(set)
    for check in payload["generation"]:
        if check["degenerate"]:
            degenerate[check["variant"]].add(check["prompt_id"])
    return [
        measurements.VariantFacts(
            variant["name"],
            measurements.correctness_status(statuses[variant["name"]]),
            frozenset(degenerate[variant["name"]]),
        )
        for variant in payload["variants"]
    ]


def _samples(runs: list[dict[str, Any]]) -> measurements.Samples:
    samples: measurements.Samples = defaultdict(lambda: defaultdict(list))
    for run in runs:
        for row in run["rows"]:
            samples[run["variant"]][row["batch_size"]].append(row["tg_tps"])
    return samples


def stored_payload(body: bytes) -> dict[str, Any]:
    """The payload inside a stored raw envelope. The envelope passed the strict parse, its
    signature and the canonical-form check when it was received, and the row is immutable (on
    PostgreSQL a trigger refuses updates), so a rebuild parses it with the plain JSON parser: the
    same objects, without the nesting scan and the duplicate-key hook (1.3 ms of CPU per submission
    instead of 0.3 ms; `_depth` is a Python loop over every character) or the canonical re-serialisation."""
    opened = envelope.open_envelope(json.loads(body), envelope.SUBMISSION_TYPE)
    payload = json.loads(opened.payload)
    if not isinstance(payload, dict):
        raise envelope.EnvelopeError("bad_payload", "Payload must be a JSON object.", "payload")
    return payload
