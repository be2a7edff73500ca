"""Synthetic payloads for the tests, the bench and the demo: one builder of a submission, so that
every caller sends a payload shaped exactly as the agent's (docs/protocol.md sections 2-4), and one
way to sign it. What differs between callers, the numbers, comes in as arguments."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from benchhub_protocol import envelope

CREATED_AT = "2026-11-29T10:00:00Z"
AGENT = {"name": "benchhub-agent", "version": "1.0.0"}
MACHINE = {
    "os": "macOS",
    "os_version": "15.7.9",
    "os_build": "24G231",
    "arch": "arm64",
    "chip": "Apple M5 Pro",
    "cpu_cores_performance": 10,
    "cpu_cores_efficiency": 4,
    "gpu_name": "Apple M5 Pro",
    "gpu_cores": 20,
    "memory_bytes": 24 * 2**30,
    "backend": "metal",
    "power_source": "ac",
    "low_power_mode": False,
    "thermal": "nominal",
}
LLAMA_CPP = {
    "repo": "https://github.com/ggml-org/llama.cpp",
    "build_type": "Release",
    "cmake_flags": ["-DGGML_METAL=ON"],
    "compiler": "Apple clang version 17.0.0",
}
SWEEP = {"tool": "llama-batched-bench", "npp": 128, "ntg": 64, "n_ctx": 4096, "flash_attn": True, "n_gpu_layers": 99}
CLEAN_OUTPUT = "c" * 64
LOOPED_OUTPUT = hashlib.sha256(b"loop").hexdigest()

Rows = Callable[[str, int], list[dict[str, Any]]]  # (variant, rep) -> that run's rows


def sweep_row(batch_size: int, tg_tps: float, pp_tps: float, *, npp: int = 128, ntg: int = 64) -> dict[str, Any]:
    """One row of llama-batched-bench's table, its times consistent with its rates."""
    return {
        "batch_size": batch_size,
        "pp_tps": pp_tps,
        "tg_tps": tg_tps,
        "t_pp_s": round(npp * batch_size / pp_tps, 6),
        "t_tg_s": round(ntg * batch_size / tg_tps, 6),
    }


def interleaved_runs(names: Sequence[str], reps: int, rows: Rows) -> list[dict[str, Any]]:
    """The runs as the agent orders them: rotations in whole cycles (A B C, B C A, C A B), then the
    rotations of the mirror (C B A, B A C, A C B), and so on: every cycle of len(names) rounds runs
    each variant once in each position (docs/protocol.md, cells v4). `rows` is called in the order
    of execution, so a caller's random numbers come out the same way every time."""
    runs: list[dict[str, Any]] = []
    for rep in range(1, reps + 1):
        block, shift = divmod(rep - 1, len(names))
        order = list(names) if block % 2 == 0 else list(reversed(names))
        for name in order[shift:] + order[:shift]:
            runs.append({"variant": name, "rep": rep, "seq": len(runs) + 1, "exit_code": 0, "rows": rows(name, rep)})
    return runs


def correctness(statuses: Mapping[str, str]) -> list[dict[str, Any]]:
    """One test-backend-ops result per variant: `pass`, `fail` or `not_run`."""
    counts = {"pass": (63, 0), "fail": (61, 2), "not_run": (0, 0)}
    return [
        {
            "variant": name,
            "tool": "test-backend-ops",
            "op": "MUL_MAT",
            "backend": "MTL0",
            "status": status,
            "passed": counts[status][0],
            "failed": counts[status][1],
        }
        for name, status in statuses.items()
    ]


def generation(names: Sequence[str], looped: Mapping[str, bool], output: str = CLEAN_OUTPUT) -> list[dict[str, Any]]:
    """One greedy generation per variant; a looped one has another output than the baseline's."""
    baseline_looped = looped.get(names[0], False)
    return [
        {
            "variant": name,
            "prompt_id": "ocean",
            "n_tokens": 96,
            "output_sha256": LOOPED_OUTPUT if looped.get(name) else output,
            "degenerate": looped.get(name, False),
            "repetition_score": 0.9 if looped.get(name) else 0.05,
            "identical_to_baseline": looped.get(name, False) == baseline_looped,
        }
        for name in names
    ]


def submission(
    *,
    nonce: str,
    campaign: str,
    model: Mapping[str, Any],
    variants: Sequence[Mapping[str, Any]],
    runs: list[dict[str, Any]],
    batch_sizes: Sequence[int],
    machine: Mapping[str, Any] = MACHINE,
    statuses: Mapping[str, str] | None = None,
    looped: Mapping[str, bool] | None = None,
    output: str = CLEAN_OUTPUT,
    flags: Sequence[str] = (),
    created_at: str = CREATED_AT,
    agent: Mapping[str, Any] = AGENT,
    llama_cpp: Mapping[str, Any] = LLAMA_CPP,
    sweep: Mapping[str, Any] = SWEEP,
) -> dict[str, Any]:
    """A schema v1 submission. Every variant passed its correctness check and none looped unless
    `statuses` or `looped` say otherwise."""
    names = [variant["name"] for variant in variants]
    return {
        "schema_version": 1,
        "nonce": nonce,
        "created_at": created_at,
        "agent": dict(agent),
        "campaign": campaign,
        "machine": dict(machine),
        "model": dict(model),
        "llama_cpp": dict(llama_cpp),
        "variants": [dict(variant) for variant in variants],
        "sweep": {**sweep, "batch_sizes": list(batch_sizes), "order": "interleaved", "runs": runs},
        "correctness": correctness({name: "pass" for name in names} | dict(statuses or {})),
        "generation": generation(names, looped or {}, output),
        "flags": list(flags),
    }


def registration(signer: envelope.Signer, handle: str, created_at: str = CREATED_AT) -> dict[str, Any]:
    """The registration payload of `signer`'s key under `handle` (docs/protocol.md section 3)."""
    return {"schema_version": 1, "handle": handle, "public_key": signer.public_key_b64, "created_at": created_at}


def signed_registration(
    signer: envelope.Signer, handle: str, *vouchers: envelope.Signer, created_at: str = CREATED_AT
) -> bytes:
    """The envelope that registers `signer` under `handle`; with vouchers (keys already on the
    handle) it links a further machine's key."""
    payload = registration(signer, handle, created_at)
    return envelope.envelope_bytes(envelope.sign(payload, envelope.REGISTRATION_TYPE, [signer, *vouchers]))


def signed_submission(payload: Mapping[str, Any], signer: envelope.Signer) -> bytes:
    return envelope.envelope_bytes(envelope.sign(payload, envelope.SUBMISSION_TYPE, [signer]))


def signed_withdrawal(submission_id: str, signer: envelope.Signer, created_at: str = "2026-12-03T10:00:00Z") -> bytes:
    """The envelope that withdraws a submission; only the key that signed it may."""
    payload = {"schema_version": 1, "submission": submission_id, "created_at": created_at}
    return envelope.envelope_bytes(envelope.sign(payload, envelope.WITHDRAWAL_TYPE, [signer]))
