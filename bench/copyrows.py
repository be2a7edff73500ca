"""Write submissions straight into the service's tables with psycopg and COPY, without Django's request
handling.

Two users: the ingest floor (one submission per transaction, as the API commits them) and the
large-state generator (many submissions per COPY). This module writes only what the product's COPY
writer does not: the submission row, its raw envelope, and the machine and model file rows they
reference (through storage's own get-or-create, fingerprint included). Every normalised row,
measurements included, comes from `storage.normalised_rows` and `bulk.write_rows`, the derivation
and writer the ingest and `rebuild_cells` use, so reads, refreshes and rebuilds see a state the API
could have produced. Needs Django set up (the models, the flag rules and their settings).
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import psycopg

from benchhub.results import bulk, flags, ingest, measurements, storage
from benchhub.results.models import RawEnvelope, Submission, time_ordered_uuid


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@dataclass
class Lookups:
    """What every submission references; the machine and model file rows are cached the way a
    long-running process would. Machines are keyed by their identity facts, models by sha256."""

    campaign_id: int
    campaign_sweep: dict[str, Any]
    machines: dict[tuple[Any, ...], int] = field(default_factory=dict)
    models: dict[str, int] = field(default_factory=dict)


def machine_id(lookups: Lookups, machine: dict[str, Any]) -> int:
    identity = tuple(machine.get(name) for name in storage.MACHINE_IDENTITY)
    if identity not in lookups.machines:
        lookups.machines[identity] = storage.machine_row(machine).pk
    return lookups.machines[identity]


def model_id(lookups: Lookups, model: dict[str, Any]) -> int:
    if model["sha256"] not in lookups.models:
        lookups.models[model["sha256"]] = storage.model_file_row(model).pk
    return lookups.models[model["sha256"]]


@dataclass(frozen=True)
class SubmissionRows:
    """One submission's rows: its own and its envelope's column values, and the normalised rows."""

    submission: dict[str, Any]
    envelope: dict[str, Any]
    normalised: tuple[uuid.UUID, storage.NormalisedRows]


def submission_rows(
    payload: dict[str, Any],
    body: bytes,
    payload_sha256: str,
    *,
    key: tuple[int, int],
    lookups: Lookups,
    received_at: datetime,
    refreshed: bool,
) -> SubmissionRows:
    """Every row of one submission, as the ingest writes them. `key` is (key id, contributor id);
    `refreshed` marks its cells as already recomputed."""
    key_id, contributor_id = key
    submission_id = time_ordered_uuid(received_at)
    machine, model = payload["machine"], payload["model"]
    submission_flags = flags.derive(payload, lookups.campaign_sweep)
    submission = {
        "nonce": payload["nonce"],
        "payload_sha256": payload_sha256,
        "created_at": ingest.created_at_of(payload["created_at"]),
        "received_at": received_at,
        "status": Submission.Status.FLAGGED.value if submission_flags else Submission.Status.ACCEPTED.value,
        "hidden": False,
        "flags": submission_flags,
        "is_demo": False,
        "agent_name": payload["agent"]["name"],
        "agent_version": payload["agent"]["version"],
        "power_source": machine["power_source"],
        "low_power_mode": machine["low_power_mode"],
        "thermal": machine["thermal"],
        "llama_cpp": payload["llama_cpp"],
        "sweep_settings": {name: value for name, value in payload["sweep"].items() if name != "runs"},
        "cells_refreshed_at": received_at if refreshed else None,
        "campaign_id": lookups.campaign_id,
        "contributor_id": contributor_id,
        "key_id": key_id,
        "machine_id": machine_id(lookups, machine),
        "model_file_id": model_id(lookups, model),
        "chip": machine["chip"],
        "gpu_cores": machine["gpu_cores"],
        "quant": model["file_type"],
    }
    # The identity the machine row was found by includes chip and GPU cores; the model row is found by sha256.
    facts = measurements.SubmissionFacts(
        False, submission_flags, lookups.campaign_id, contributor_id, machine["chip"], machine["gpu_cores"],
        model["file_type"],
    )  # fmt: skip
    return SubmissionRows(
        submission={"id": submission_id, **submission},
        envelope={"submission_id": submission_id, "body": body, "sha256": sha256_hex(body), "received_at": received_at},
        normalised=(submission_id, storage.normalised_rows(facts, payload)),
    )


def write(cursor: psycopg.Cursor[Any], written: Sequence[SubmissionRows]) -> None:
    """COPY these submissions' rows: submissions and envelopes here, the rest by the product's
    writer (ids from the tables' sequences; the foreign keys are checked at commit)."""
    submissions, envelopes = bulk.Table(Submission, ()), bulk.Table(RawEnvelope, ())
    for rows in written:
        submissions.add((), rows.submission)
        envelopes.add((), rows.envelope)
    submissions.copy(cursor)
    envelopes.copy(cursor)
    bulk.write_rows(cursor, [rows.normalised for rows in written])


def now() -> datetime:
    return datetime.now(UTC)
