"""A client written from docs/protocol.md alone (its own PAE, JCS and base64; PyNaCl and rfc8785 only,
none of benchhub's code) registers, submits, retries and reads back the numbers it expects."""

from __future__ import annotations

import base64
import hashlib
import json
import math
import os
from typing import Any

import nacl.signing
import pytest
import rfc8785
from django.test import Client

from benchhub.results import cells
from tests.conftest import PATCH_TEXT

pytestmark = pytest.mark.django_db

REGISTRATION = "application/vnd.benchhub.registration.v1+json"
SUBMISSION = "application/vnd.benchhub.submission.v1+json"


class ProtocolClient:
    def __init__(self, client: Client, seed: bytes) -> None:
        self.http = client
        self.key = nacl.signing.SigningKey(seed)
        self.public = bytes(self.key.verify_key)
        self.keyid = hashlib.sha256(self.public).hexdigest()

    def envelope(self, payload_type: str, payload: dict[str, Any]) -> bytes:
        body = rfc8785.dumps(payload)
        pae = b"DSSEv1 %d %s %d %s" % (len(payload_type), payload_type.encode(), len(body), body)
        signature = self.key.sign(pae).signature
        return json.dumps(
            {
                "payloadType": payload_type,
                "payload": base64.b64encode(body).decode(),
                "signatures": [{"keyid": self.keyid, "sig": base64.b64encode(signature).decode()}],
            }
        ).encode()

    def post(self, path: str, body: bytes) -> Any:
        return self.http.post(path, data=body, content_type="application/json")


def test_it_serves_a_client_that_knows_only_the_protocol(client: Client, campaign: Any) -> None:
    me = ProtocolClient(client, hashlib.sha256(b"independent").digest())
    registration = {
        "schema_version": 1,
        "handle": "indie",
        "public_key": base64.b64encode(me.public).decode(),
        "created_at": "2026-11-29T12:00:00Z",
    }
    assert me.post("/api/v1/contributors/", me.envelope(REGISTRATION, registration)).json() == {
        "handle": "indie",
        "keyid": me.keyid,
    }

    manifest = client.get("/api/v1/campaigns/mv-ext-iquants/").json()
    variants = [v for v in manifest["variants"] if v["name"] in ("upstream", "01")]
    assert variants[1]["patches"][0]["sha256"] == hashlib.sha256(PATCH_TEXT["01-mv-ext-iquants.patch"]).hexdigest()
    tg = {"upstream": [120.0, 122.0], "01": [180.0, 186.0]}
    payload = {
        "schema_version": 1,
        "nonce": os.urandom(16).hex(),
        "created_at": "2026-11-29T12:01:00Z",
        "agent": {"name": "indie-client", "version": "0.1"},
        "campaign": manifest["slug"],
        "machine": {
            "os": "macOS",
            "os_version": "26.1",
            "arch": "arm64",
            "chip": "Apple M3",
            "cpu_cores_performance": 4,
            "cpu_cores_efficiency": 4,
            "gpu_name": "Apple M3",
            "gpu_cores": 10,
            "memory_bytes": 17179869184,
            "backend": "metal",
            "power_source": "ac",
            "low_power_mode": False,
            "thermal": "nominal",
        },
        "model": {
            "file_name": "q.gguf",
            "sha256": "ab" * 32,
            "size_bytes": 700_000_000,
            "architecture": "qwen3",
            "n_params": 1720574976,
            "file_type": "IQ3_XXS",
            "tensor_bytes_by_type": {"IQ3_XXS": 690_000_000},
        },
        "llama_cpp": {"repo": manifest["repo"], "build_type": "Release", "cmake_flags": [], "compiler": "clang"},
        "variants": [
            {
                "name": v["name"],
                "commit": v["commit"],
                "env": v["env"],
                "patches": [{"name": p["name"], "sha256": p["sha256"]} for p in v["patches"]],
            }
            for v in variants
        ],
        "sweep": {
            "tool": "llama-batched-bench",
            "npp": 128,
            "ntg": 64,
            "n_ctx": 4096,
            "flash_attn": True,
            "n_gpu_layers": 99,
            "batch_sizes": [4],
            "order": "interleaved",
            "runs": [
                {
                    "variant": name,
                    "rep": rep,
                    "seq": seq,
                    "exit_code": 0,
                    "rows": [
                        {"batch_size": 4, "pp_tps": 400.5, "tg_tps": tg[name][rep - 1], "t_pp_s": 1.25, "t_tg_s": 1.5}
                    ],
                }
                for seq, (name, rep) in enumerate([("upstream", 1), ("01", 1), ("01", 2), ("upstream", 2)], start=1)
            ],
        },
        "correctness": [
            {
                "variant": "01",
                "tool": "test-backend-ops",
                "op": "MUL_MAT",
                "backend": "MTL0",
                "status": "pass",
                "passed": 63,
                "failed": 0,
            }
        ],
        "generation": [],
        "flags": [],
    }
    body = me.envelope(SUBMISSION, payload)
    created = me.post("/api/v1/submissions/", body)
    assert created.status_code == 201
    retried = me.post("/api/v1/submissions/", body)
    assert (retried.status_code, retried.json()) == (200, created.json())
    assert client.get(f"/api/v1/submissions/{created.json()['id']}/envelope").content == body

    cells.refresh_submission_cells(created.json()["id"])  # what the Celery worker does after the commit
    board = client.get("/api/v1/leaderboard/", {"campaign": "mv-ext-iquants", "chip": "Apple M3", "variant": "01"})
    [row] = board.json()["rows"]
    speedup = math.sqrt(180 / 120 * 186 / 122)  # one whole cycle: the geometric mean of its two rounds' ratios
    assert row["baseline_tg_tps"] == pytest.approx(121.0) and row["speedup"] == pytest.approx(speedup)
    assert row["tg_tps"] == pytest.approx(121 * speedup)
    assert (row["interval"], row["ci_low"], row["ci_high"], row["verdict"]) == (None, None, None, "too few machines")
    assert (row["tau"], row["i2"]) == (None, None)
    assert (row["n_machines"], row["n_submissions"], row["n_contributors"]) == (1, 1, 1)
