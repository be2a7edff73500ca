"""Normalised rows of a submission, written from its payload at ingest; and the payload of a stored
raw envelope (the one source of truth that `rederive_measurements` derives everything from)."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from benchhub_protocol import envelope

from benchhub.results.models import (
    CorrectnessCheck,
    GenerationCheck,
    Machine,
    ModelFile,
    Submission,
    SubmissionVariant,
    SweepRow,
    SweepRun,
)
from benchhub.rows import found_or_inserted, get_or_insert

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
    return get_or_insert(Machine, {"fingerprint": fingerprint}, facts)


def model_facts(model: dict[str, Any]) -> dict[str, Any]:
    """What the file's bytes decide (ModelFile.FACTS): two claims about one sha256 conflict when these differ."""
    return {name: model.get(name) for name in ModelFile.FACTS}


def facts_digest(model: dict[str, Any]) -> str:
    return hashlib.sha256(envelope.canonical_bytes(model_facts(model))).hexdigest()


def model_file_row(model: dict[str, Any]) -> ModelFile:
    """This submission's own claim about its model file (identical claims share a row)."""
    return model_file_claim(model)[0]


def model_file_claim(model: dict[str, Any]) -> tuple[ModelFile, bool]:
    """The claim's row, and whether it is new: only a new claim can start a file's dispute."""
    claim = {**model_facts(model), "file_name": model["file_name"], "label": model.get("label", "")}
    fingerprint = hashlib.sha256(envelope.canonical_bytes(claim)).hexdigest()
    defaults = {**claim, "facts_digest": facts_digest(model)}
    return found_or_inserted(ModelFile, {"fingerprint": fingerprint}, defaults)


def store_rows(pairs: list[tuple[Submission, dict[str, Any]]]) -> dict[Any, dict[str, SubmissionVariant]]:
    """The normalised rows of each (submission, payload), one INSERT per table for all of them
    (ingest passes one, the bench's state generator hundreds); returns each submission's variants
    by name, for its measurements."""
    variants = SubmissionVariant.objects.bulk_create(
        SubmissionVariant(
            submission=submission,
            position=position,
            name=variant["name"],
            commit=variant["commit"],
            patches=variant["patches"],
            env=variant["env"],
        )
        for submission, payload in pairs
        for position, variant in enumerate(payload["variants"])
    )
    by_name = {(variant.submission_id, variant.name): variant for variant in variants}
    runs = [(submission, run) for submission, payload in pairs for run in payload["sweep"]["runs"]]
    sweep_runs = SweepRun.objects.bulk_create(
        SweepRun(
            submission=submission,
            variant=by_name[submission.pk, run["variant"]],
            rep=run["rep"],
            seq=run["seq"],
            exit_code=run["exit_code"],
        )
        for submission, run in runs
    )
    SweepRow.objects.bulk_create(
        SweepRow(run=sweep_run, **{name: row[name] for name in SWEEP_ROW_FIELDS})
        for sweep_run, (_, run) in zip(sweep_runs, runs, strict=True)
        for row in run["rows"]
    )
    CorrectnessCheck.objects.bulk_create(
        CorrectnessCheck(
            submission=submission,
            variant=by_name[submission.pk, check["variant"]],
            tool=check["tool"],
            op=check["op"],
            backend=check["backend"],
            status=check["status"],
            passed=check["passed"],
            failed=check["failed"],
            reason=check.get("reason", ""),
        )
        for submission, payload in pairs
        for check in payload["correctness"]
    )
    GenerationCheck.objects.bulk_create(
        GenerationCheck(
            submission=submission,
            variant=by_name[submission.pk, check["variant"]],
            **{name: check[name] for name in GENERATION_FIELDS},
        )
        for submission, payload in pairs
        for check in payload["generation"]
    )
    by_submission: dict[Any, dict[str, SubmissionVariant]] = {}
    for (submission_id, name), variant in by_name.items():
        by_submission.setdefault(submission_id, {})[name] = variant
    return by_submission


SWEEP_ROW_FIELDS = ("batch_size", "pp_tps", "tg_tps", "t_pp_s", "t_tg_s")
GENERATION_FIELDS = (
    "prompt_id",
    "n_tokens",
    "output_sha256",
    "degenerate",
    "repetition_score",
    "identical_to_baseline",
)


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
