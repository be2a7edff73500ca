"""Snapshots built in the test: signed envelopes, written as gzipped JSON lines in the format of
/api/v1/snapshot/ (cells v4), and the standalone script loaded from its file."""

from __future__ import annotations

import base64
import gzip
import hashlib
import importlib.util
import json
import sys
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import ModuleType
from typing import Any

from benchhub_protocol import envelope
from benchhub_protocol.payloads import signed_withdrawal

from tests.conftest import PATCH_TEXT, VEC_ENV, build_payload, persona, signed_submission

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "recompute_cells.py"
SLUG = "mv-ext-iquants"
COMMIT = "0c1e57098bba43ac29e6e3b677cdceebdd22334f"
START = datetime(2026, 12, 1, 10, 0, tzinfo=UTC)
GENERATED = datetime(2026, 12, 3, 10, 0, tzinfo=UTC)


def load_script() -> ModuleType:
    """The script as a module, from its path (scripts/ is not a package)."""
    if "recompute_cells" not in sys.modules:
        spec = importlib.util.spec_from_file_location("recompute_cells", SCRIPT)
        assert spec and spec.loader
        module = importlib.util.module_from_spec(spec)
        sys.modules["recompute_cells"] = module
        spec.loader.exec_module(module)
    return sys.modules["recompute_cells"]


def _patch(name: str) -> dict[str, str]:
    return {"name": name, "sha256": hashlib.sha256(PATCH_TEXT[name]).hexdigest(), "url": f"http://x/patches/{name}"}


def manifest() -> dict[str, Any]:
    """The body GET /api/v1/campaigns/mv-ext-iquants/ serves, with the test patch files' hashes."""
    variants = [("upstream", [], {}), ("01", ["01-mv-ext-iquants.patch"], {}), ("01+02", list(PATCH_TEXT), VEC_ENV)]
    return {
        "slug": SLUG,
        "title": "Metal mv-ext for i-quants (small-batch decode)",
        "repo": "https://github.com/ggml-org/llama.cpp",
        "baseline": "upstream",
        "variants": [
            {
                "name": name,
                "commit": COMMIT,
                "ref": None,
                "available": True,
                "patches": [_patch(patch) for patch in patches],
                "env": env,
            }
            for name, patches, env in variants
        ],
        "sweep": {
            "npp": 128,
            "ntg": 64,
            "flash_attn": True,
            "n_gpu_layers": 99,
            "batch_sizes": [1, 2, 3, 4, 5, 8, 9, 12, 16],
            "reps": 2,
            "extra_args": [],
        },
        "correctness": {"tool": "test-backend-ops", "op": "MUL_MAT"},
    }


def payload(
    tg: Mapping[str, Mapping[int, list[float]]] | None = None,
    *,
    memory: int | None = None,
    correctness: Mapping[str, str] | None = None,
    **changes: Any,
) -> dict[str, Any]:
    """build_payload (tests/conftest.py) whose baseline passed its correctness check too, by default;
    `memory` sets machine.memory_bytes (another machine of the same contributor); `flags` the agent's flags."""
    machine = dict(changes.pop("machine", {}))
    flags = changes.pop("flags", [])
    if memory is not None:
        machine["memory_bytes"] = memory
    body = build_payload(tg=tg, machine=machine, correctness={"upstream": "pass", **(correctness or {})}, **changes)
    body["flags"] = list(flags)
    return body


def ratio_tg(ratio: float, base: float = 100.0, reps: int = 2, batch: int = 1) -> dict[str, dict[int, list[float]]]:
    """A sweep of the baseline at `base` and variant 01 at `base * ratio`, in every round."""
    return {"upstream": {batch: [base] * reps}, "01": {batch: [base * ratio] * reps}}


def withdrawal(submission_id: str, signer: envelope.Signer) -> str:
    return signed_withdrawal(submission_id, signer).decode("utf-8")


class SnapshotBuilder:
    """Contributors with keys from fixed seeds, submissions signed by them, received a second apart."""

    def __init__(self) -> None:
        self.manifests = [manifest()]
        self.handles: list[str] = []
        self.keys: dict[str, list[str]] = {}  # handle -> persona names of its other machines' keys
        self.lines: list[dict[str, Any]] = []
        self.probation_s = 0
        self.registered: dict[str, datetime] = {}  # persona name -> registration time (default: START - 1 day)
        self.rules = {
            "min_effect": 0.02,
            "plausible_ratio": [0.3333, 3.0],
            "patched_backends": ["metal"],
            "headline_sizes": [2, 3, 4, 5, 8],
            "predict_cycles": 3,
        }

    def add(
        self, handle: str, body: Mapping[str, Any], state: str = "counted", reason: str = "", key: str | None = None
    ) -> dict[str, Any]:
        """`key` names another machine of the handle (its own key); by default the handle's first key."""
        if handle not in self.handles:
            self.handles.append(handle)
        signer = persona(key or handle)
        self.keys.setdefault(handle, [])
        if key and key not in self.keys[handle]:
            self.keys[handle].append(key)
        text = signed_submission(body, signer).decode("utf-8")
        received = START + timedelta(seconds=len(self.lines))
        line_id = f"00000000-0000-4000-8000-{len(self.lines):012d}"
        line = {
            "kind": "submission",
            "id": line_id,
            "received_at": received.isoformat().replace("+00:00", "Z"),
            "contributor": handle,
            "envelope": text,
            "state": state,
            "held": ["quarantined"] if state == "held" else [],
            "reason": reason,
            "withdrawn_at": received.isoformat() if state == "withdrawn" else None,
            "withdrawal": withdrawal(line_id, signer) if state == "withdrawn" else None,
        }
        self.lines.append(line)
        return line

    def contributor_lines(self) -> list[dict[str, Any]]:
        return [
            {
                "kind": "contributor",
                "handle": handle,
                "keys": [
                    {
                        "keyid": persona(name).keyid,
                        "public_key": persona(name).public_key_b64,
                        "registered_at": self.registered.get(name, START - timedelta(days=1)).isoformat(),
                    }
                    for name in [handle, *self.keys.get(handle, [])]
                ],
            }
            for handle in self.handles
        ]

    def data(self) -> bytes:
        header = {
            "kind": "snapshot",
            "generated_at": GENERATED.isoformat(),
            "cells_version": 4,
            "key_probation_s": self.probation_s,
        }
        campaigns = [{"kind": "campaign", "manifest": m, "rules": self.rules} for m in self.manifests]
        lines = [header, *campaigns, *self.contributor_lines(), *self.lines]
        return gzip.compress("".join(json.dumps(line) + "\n" for line in lines).encode("utf-8"))

    def write(self, folder: Path) -> Path:
        path = folder / "snapshot.jsonl.gz"
        path.write_bytes(self.data())
        return path

    def boards(self) -> dict[str, list[dict[str, Any]]]:
        script = load_script()
        snapshot = script.parse_snapshot(self.data())
        boards = dict(script.recompute(snapshot))
        assert snapshot.failures == []
        return boards

    def cell(self, variant: str = "01", batch: int = 1, **key: Any) -> dict[str, Any]:
        """The one recomputed row of (variant, batch) matching `key` (chip, model_sha256, ...)."""
        rows = [
            row
            for row in self.boards()[SLUG]
            if row["variant"] == variant and row["batch_size"] == batch and all(row[k] == v for k, v in key.items())
        ]
        assert len(rows) == 1, rows
        return rows[0]


def tamper(line: dict[str, Any], change: Any) -> None:
    """Edit the signed payload of a snapshot line in place, keeping the old signature."""
    env = json.loads(line["envelope"])
    body = json.loads(base64.b64decode(env["payload"]))
    change(body)
    env["payload"] = base64.b64encode(envelope.canonical_bytes(body)).decode("ascii")
    line["envelope"] = json.dumps(env)


def excluded(**counts: int) -> dict[str, int]:
    return {reason: counts.get(reason, 0) for reason in load_script().REASONS}
