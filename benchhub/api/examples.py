"""What the API docs show as examples: real bodies, not the generator's "string" and 0. The request
envelopes are the protocol test vector's (signed, verifiable: tests/vectors/), the read examples
carry the published M5 Pro numbers of mv-ext-iquants (benchhub/web/data/reference_rows.json)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from benchhub_protocol.words import DEFAULT_MIN_EFFECT, FASTER
from drf_spectacular.utils import OpenApiExample

ENVELOPES: dict[str, Any] = json.loads((Path(__file__).with_name("openapi_envelopes.json")).read_text())
SUBMISSION_ID = "019ad1c3-5e2a-7c41-9b7e-2f4c8d1a6e03"
VARIANT_COMMIT = "836d57176dc699a726c55418e4f96b8ca628e1bf"  # the commit the variant was built from
MODEL_SHA256 = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"

REGISTRATION = OpenApiExample(
    "registration (POST /api/v1/contributors/)",
    value=ENVELOPES["registration"],
    request_only=True,
    description="Registers the handle `vector` with the key the envelope is signed by.",
)
SUBMISSION = OpenApiExample(
    "submission (POST /api/v1/submissions/)",
    value=ENVELOPES["submission"],
    request_only=True,
    description="An M5 Pro run of mv-ext-iquants, signed by the registered key.",
)
REGISTERED = [OpenApiExample("registered", value={"handle": "vector", "keyid": ENVELOPES["keyid"]}, response_only=True)]
CREATED = [
    OpenApiExample(
        "stored",
        value={
            "id": SUBMISSION_ID,
            "url": f"https://benchhub.example/submissions/{SUBMISSION_ID}/",
            "status": "accepted",
            "counts_from": "2026-11-30T10:00:00Z",
        },
        description="From a key registered a day ago or less: its rows count from counts_from (null: at once).",
        response_only=True,
    )
]
ERROR = [
    OpenApiExample(
        "a field at fault",
        value={
            "error": "invalid",
            "detail": "machine.gpu_cores: -1 is less than the minimum of 1",
            "field": "machine.gpu_cores",
        },
        response_only=True,
    ),
    OpenApiExample(
        "no such submission",
        value={"error": "not_found", "detail": "'42' is not a submission id: ids are UUIDs.", "field": "id"},
        response_only=True,
    ),
]
LEADERBOARD = [
    OpenApiExample(
        "one cell",
        value={
            "campaign": "mv-ext-iquants",
            "baseline": "upstream",
            "rows": [
                {
                    "chip": "Apple M5 Pro",
                    "gpu_cores": 20,
                    "model": "Qwen3-1.7B UD-IQ2_XXS",
                    "model_sha256": MODEL_SHA256,
                    "quant": "IQ2_XXS",
                    "variant": "01",
                    "commit": VARIANT_COMMIT,
                    "batch_size": 4,
                    "baseline_tg_tps": 148.0,
                    "tg_tps": 209.9,
                    "speedup": 1.4182,
                    "interval": "95%, page-wise",
                    "ci_low": 1.3901,
                    "ci_high": 1.4405,
                    "predict_low": 1.3702,
                    "predict_high": 1.4611,
                    "predict_level": 0.8,
                    "tau": 0.0071,
                    "i2": 0.42,
                    "verdict": FASTER,
                    "min_effect": DEFAULT_MIN_EFFECT,
                    "campaign_version": 1,
                    "superseded": False,
                    "n_machines": 3,
                    "n_submissions": 4,
                    "n_contributors": 3,
                    "n_pending": 1,
                    "excluded": {
                        "hidden": 0,
                        "withdrawn": 0,
                        "held": 0,
                        "correctness_failed": 0,
                        "correctness_not_run": 1,
                        "degenerate_output": 0,
                        "run_state": 0,
                    },
                    "backend": "metal",
                    "control": False,
                }
            ],
        },
        response_only=True,
    )
]
REFERENCE_ROW = [
    OpenApiExample(
        "a published row",
        value={
            "campaign": "mv-ext-iquants",
            "chip": "Apple M5 Pro",
            "gpu_cores": None,
            "machine": "M5 Pro 24GB",
            "model": "Qwen3-1.7B UD-IQ2_XXS",
            "quant": "IQ2_XXS",
            "baseline": "upstream",
            "variant": "01",
            "batch_size": 4,
            "baseline_tg_tps": 148.0,
            "tg_tps": 209.9,
            "speedup": 1.4182,
            "source": "llama.cpp PR #27350 (patch 01), author's published sweep",
            "source_url": "https://github.com/ggml-org/llama.cpp/pull/27350",
            "method": "llama-batched-bench -npp 128 -ntg 64 -fa 1 -ngl 99; builds interleaved A B A B, 2 reps",
            "signed": False,
        },
        response_only=True,
    )
]
MEASUREMENT = [
    OpenApiExample(
        "one variant at one batch size",
        value={
            "submission": SUBMISSION_ID,
            "campaign": "mv-ext-iquants",
            "contributor": "vector",
            "chip": "Apple M5 Pro",
            "gpu_cores": 20,
            "model_sha256": MODEL_SHA256,
            "quant": "IQ2_XXS",
            "backend": "metal",
            "variant": "01",
            "commit": VARIANT_COMMIT,
            "batch_size": 4,
            "n_rounds": 2,
            "n_cycles": 1,
            "tg_tps": 209.9,
            "baseline_tg_tps": 148.0,
            "speedup": 1.4182,
            "log_se": 0.0021,
            "correctness_status": "pass",
            "excluded_reason": "",
        },
        response_only=True,
    )
]
