"""Write submissions straight into the service's tables with psycopg and COPY, bypassing Django.

Two users: the ingest floor (one submission per transaction, as the API commits them) and the
large-state generator (many submissions per COPY). Rows are exactly those the ingest path writes,
measurements included, so reads, refreshes and rebuilds see a state the API could have produced.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import psycopg

from benchhub.results import stats

TABLES: dict[str, tuple[str, ...]] = {
    "results_submission": (
        "id", "nonce", "payload_sha256", "created_at", "received_at", "status", "hidden", "flags", "is_demo",
        "agent_name", "agent_version", "power_source", "low_power_mode", "thermal", "llama_cpp", "sweep_settings",
        "cells_refreshed_at", "campaign_id", "contributor_id", "key_id", "machine_id", "model_file_id",
    ),
    "results_rawenvelope": ("submission_id", "body", "sha256", "received_at"),
    "results_submissionvariant": ("id", "position", "name", "commit", "patches", "env", "submission_id"),
    "results_sweeprun": ("id", "rep", "seq", "exit_code", "submission_id", "variant_id"),
    "results_sweeprow": ("batch_size", "pp_tps", "tg_tps", "t_pp_s", "t_tg_s", "run_id"),
    "results_correctnesscheck": (
        "tool", "op", "backend", "status", "passed", "failed", "reason", "submission_id", "variant_id",
    ),
    "results_generationcheck": (
        "prompt_id", "n_tokens", "output_sha256", "degenerate", "repetition_score", "identical_to_baseline",
        "submission_id", "variant_id",
    ),
    "results_measurement": (
        "chip", "gpu_cores", "quant", "variant_name", "batch_size", "tg_tps", "baseline_tg_tps", "speedup", "spread",
        "n_reps", "correctness_status", "excluded_reason", "campaign_id", "contributor_id", "submission_id",
        "variant_id",
    ),
}  # fmt: skip


ID_TABLES = ("results_submissionvariant", "results_sweeprun")


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class IdBlock:
    """Identity values reserved in blocks, so COPY can write parents and children in one pass."""

    def __init__(self, connection: psycopg.Connection[Any], table: str, size: int = 100_000) -> None:
        self.connection, self.table, self.size = connection, table, size
        self.next_id, self.end = 0, 0

    def take(self) -> int:
        if self.next_id >= self.end:
            with self.connection.cursor() as cursor:
                sequence = cursor.execute("SELECT pg_get_serial_sequence(%s, 'id')", [self.table]).fetchone()[0]  # type: ignore[index]
                last = cursor.execute(
                    "SELECT setval(%s, nextval(%s) + %s - 1)", [sequence, sequence, self.size]
                ).fetchone()[0]  # type: ignore[index]
            self.next_id, self.end = last - self.size + 1, last + 1
        value = self.next_id
        self.next_id += 1
        return value


@dataclass
class Lookups:
    """Rows every submission references; cached the way a long-running process would."""

    campaign_id: int
    machines: dict[str, int] = field(default_factory=dict)
    models: dict[str, int] = field(default_factory=dict)


def machine_id(cursor: psycopg.Cursor[Any], lookups: Lookups, machine: dict[str, Any]) -> int:
    from benchhub_agent import envelope

    from benchhub.results.storage import MACHINE_IDENTITY

    facts = {name: machine.get(name, "" if name == "os_build" else None) for name in MACHINE_IDENTITY}
    fingerprint = hashlib.sha256(envelope.canonical_bytes(facts)).hexdigest()
    if fingerprint not in lookups.machines:
        columns = ", ".join(["fingerprint", *facts])
        row = cursor.execute(
            f"INSERT INTO results_machine ({columns}) VALUES ({', '.join(['%s'] * (len(facts) + 1))}) "
            "ON CONFLICT (fingerprint) DO UPDATE SET fingerprint = EXCLUDED.fingerprint RETURNING id",
            [fingerprint, *facts.values()],
        ).fetchone()
        lookups.machines[fingerprint] = row[0]  # type: ignore[index]
    return lookups.machines[fingerprint]


def model_id(cursor: psycopg.Cursor[Any], lookups: Lookups, model: dict[str, Any]) -> int:
    if model["sha256"] not in lookups.models:
        row = cursor.execute(
            "INSERT INTO results_modelfile (sha256, file_name, architecture, n_params, file_type, size_bytes, "
            "tensor_bytes_by_type, label) VALUES (%s, %s, %s, %s, %s, %s, %s, %s) "
            "ON CONFLICT (sha256) DO UPDATE SET sha256 = EXCLUDED.sha256 RETURNING id",
            [
                model["sha256"], model["file_name"], model["architecture"], model["n_params"], model["file_type"],
                model["size_bytes"], json.dumps(model["tensor_bytes_by_type"]), model.get("label", ""),
            ],
        ).fetchone()  # fmt: skip
        lookups.models[model["sha256"]] = row[0]  # type: ignore[index]
    return lookups.models[model["sha256"]]


def _exclusion(status: str, degenerate: set[str], baseline_degenerate: set[str]) -> str:
    if status == "fail":
        return "correctness_failed"
    if degenerate - baseline_degenerate:
        return "degenerate_output"
    return ""


def rows_of(
    payload: dict[str, Any],
    body: bytes,
    payload_sha256: str,
    *,
    key: tuple[int, int],
    refs: tuple[int, int, int],
    ids: dict[str, IdBlock],
    received_at: datetime,
    refreshed: bool,
) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of one submission, keyed by table. `key` is (key id, contributor id) and `refs` is
    (campaign id, machine id, model file id)."""
    key_id, contributor_id = key
    campaign_id, machine, model = refs
    submission_id = uuid.uuid4()
    flags = sorted(payload["flags"])
    settings = {name: value for name, value in payload["sweep"].items() if name != "runs"}
    out: dict[str, list[tuple[Any, ...]]] = defaultdict(list)
    out["results_submission"].append(
        (
            submission_id, payload["nonce"], payload_sha256, payload["created_at"], received_at,
            "flagged" if flags else "accepted", False, json.dumps(flags), False, payload["agent"]["name"],
            payload["agent"]["version"], payload["machine"]["power_source"], payload["machine"]["low_power_mode"],
            payload["machine"]["thermal"], json.dumps(payload["llama_cpp"]), json.dumps(settings),
            received_at if refreshed else None, campaign_id, contributor_id, key_id, machine, model,
        )
    )  # fmt: skip
    out["results_rawenvelope"].append((submission_id, body, hashlib.sha256(body).hexdigest(), received_at))
    variant_ids = {}
    for position, variant in enumerate(payload["variants"]):
        variant_ids[variant["name"]] = ids["results_submissionvariant"].take()
        out["results_submissionvariant"].append(
            (
                variant_ids[variant["name"]], position, variant["name"], variant["commit"],
                json.dumps(variant["patches"]), json.dumps(variant["env"]), submission_id,
            )
        )  # fmt: skip
    samples: dict[str, dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
    for run in payload["sweep"]["runs"]:
        run_id = ids["results_sweeprun"].take()
        out["results_sweeprun"].append(
            (run_id, run["rep"], run["seq"], run["exit_code"], submission_id, variant_ids[run["variant"]])
        )
        for row in run["rows"]:
            out["results_sweeprow"].append(
                (row["batch_size"], row["pp_tps"], row["tg_tps"], row["t_pp_s"], row["t_tg_s"], run_id)
            )
            samples[run["variant"]][row["batch_size"]].append(row["tg_tps"])
    statuses: dict[str, set[str]] = defaultdict(set)
    for check in payload["correctness"]:
        statuses[check["variant"]].add(check["status"])
        out["results_correctnesscheck"].append(
            (
                check["tool"], check["op"], check["backend"], check["status"], check["passed"], check["failed"],
                check.get("reason", ""), submission_id, variant_ids[check["variant"]],
            )
        )  # fmt: skip
    degenerate: dict[str, set[str]] = defaultdict(set)
    for check in payload["generation"]:
        if check["degenerate"]:
            degenerate[check["variant"]].add(check["prompt_id"])
        out["results_generationcheck"].append(
            (
                check["prompt_id"], check["n_tokens"], check["output_sha256"], check["degenerate"],
                check["repetition_score"], check["identical_to_baseline"], submission_id,
                variant_ids[check["variant"]],
            )
        )  # fmt: skip
    baseline = payload["variants"][0]["name"]
    machine_facts, quant = payload["machine"], payload["model"]["file_type"]
    for variant in payload["variants"]:
        name = variant["name"]
        status = next((s for s in ("fail", "pass", "not_run") if s in statuses[name]), "missing")
        reason = _exclusion(status, degenerate[name], degenerate[baseline])
        for batch_size, values in sorted(samples[name].items()):
            tg = stats.median(values)
            baseline_values = samples[baseline].get(batch_size)
            baseline_tg = stats.median(baseline_values) if baseline_values else None
            out["results_measurement"].append(
                (
                    machine_facts["chip"], machine_facts["gpu_cores"], quant, name, batch_size, tg, baseline_tg,
                    stats.paired_speedup(tg, baseline_tg) if baseline_tg is not None else None,
                    stats.spread(values), len(values), status, reason, campaign_id, contributor_id, submission_id,
                    variant_ids[name],
                )
            )  # fmt: skip
    return out


def copy_rows(cursor: psycopg.Cursor[Any], batches: Iterable[dict[str, list[tuple[Any, ...]]]]) -> None:
    """COPY every table's rows, parents first (the foreign keys are deferred to commit anyway)."""
    merged: dict[str, list[tuple[Any, ...]]] = defaultdict(list)
    for batch in batches:
        for table, rows in batch.items():
            merged[table].extend(rows)
    for table, columns in TABLES.items():
        if merged[table]:
            with cursor.copy(f"COPY {table} ({', '.join(columns)}) FROM STDIN") as copy:
                for row in merged[table]:
                    copy.write_row(row)


def now() -> datetime:
    return datetime.now(UTC)
