"""Realistic signed submissions: the campaign's 3 variants x 9 batch sizes x 2 interleaved reps,
with correctness and generation checks, spread over a crowd of chips, quants and contributors.

Deterministic for a given seed, so every run of the suite posts the same kind of bodies.
"""

from __future__ import annotations

import hashlib
import random
import uuid
from dataclasses import dataclass
from typing import Any

from benchhub_protocol import envelope
from benchhub_protocol import model_facts as model_facts_rule
from benchhub_protocol import payloads as protocol_payloads

from benchhub.results import plausibility

CAMPAIGN = "mv-ext-iquants"
COMMIT = "0c1e57098bba43ac29e6e3b677cdceebdd22334f"
BATCH_SIZES = (1, 2, 3, 4, 5, 8, 9, 12, 16)
REPS = 2
# (chip, GPU cores, memory GiB): Apple silicon as a crowd would send it.
CHIPS = tuple(
    (chip, cores, memory)
    for chip, options in {
        "Apple M1": ((7, 8), (8, 16)),
        "Apple M1 Pro": ((14, 16), (16, 32)),
        "Apple M1 Max": ((24, 32), (32, 64)),
        "Apple M2": ((8, 10), (8, 24)),
        "Apple M2 Pro": ((16, 19), (16, 32)),
        "Apple M2 Max": ((30, 38), (32, 96)),
        "Apple M2 Ultra": ((60, 76), (64, 192)),
        "Apple M3": ((8, 10), (8, 24)),
        "Apple M3 Pro": ((14, 18), (18, 36)),
        "Apple M3 Max": ((30, 40), (36, 128)),
        "Apple M4": ((10,), (16, 32)),
        "Apple M4 Pro": ((16, 20), (24, 64)),
        "Apple M4 Max": ((32, 40), (36, 128)),
        "Apple M5": ((10,), (16, 32)),
        "Apple M5 Pro": ((16, 20), (24, 64)),
    }.items()
    for cores in options[0]
    for memory in options[1]
)
QUANTS = ("IQ2_XXS", "IQ2_XS", "IQ2_S", "IQ3_XXS", "IQ3_S", "Q4_K_M")
MODELS = (
    ("Qwen3-1.7B", "qwen3", 1720574976),
    ("Llama-3.2-3B", "llama", 3212749888),
    ("gemma-3-4b", "gemma3", 3880263168),
)


@dataclass(frozen=True)
class VariantSpec:
    name: str
    patches: list[dict[str, str]]
    env: dict[str, str]


def persona(index: int) -> envelope.Signer:
    return envelope.Signer.from_seed(hashlib.sha256(f"benchhub-bench-persona:{index}".encode()).digest())


def campaign_variants(definition: dict[str, Any]) -> list[VariantSpec]:
    """The variants of a campaign version's manifest, with the patch hashes it signed."""
    return [
        VariantSpec(
            variant["name"],
            [{"name": patch["name"], "sha256": patch["sha256"]} for patch in variant["patches"]],
            dict(variant["env"]),
        )
        for variant in definition["variants"]
    ]


def _number(value: float) -> float:
    """Two decimals and never a whole number, so json.dumps writes it as JCS does (no '160.0')."""
    rounded = round(value, 2)
    return rounded + 0.01 if rounded == int(rounded) else rounded


def payload(rng: random.Random, variants: list[VariantSpec], *, degenerate_share: float = 0.01) -> dict[str, Any]:
    chip, gpu_cores, memory_gib = rng.choice(CHIPS)
    quant = rng.choice(QUANTS)
    model_name, architecture, n_params = rng.choice(MODELS)
    model = model_facts(model_name, architecture, n_params, quant)
    base = rng.uniform(0.3, 0.7) * decode_bound(chip, model)
    gain = {variant.name: 1.0 + 0.08 * position + rng.uniform(-0.03, 0.05) for position, variant in enumerate(variants)}

    def rows(name: str, rep: int) -> list[dict[str, Any]]:
        measured = []
        for batch_size in BATCH_SIZES:
            tg = base * (1 + 0.05 * batch_size) * (gain[name] if batch_size > 1 else 1.0) * rng.gauss(1, 0.004)
            measured.append(
                {
                    "batch_size": batch_size,
                    "pp_tps": _number(base * 9 * rng.gauss(1, 0.01)),
                    "tg_tps": _number(tg),
                    "t_pp_s": _number(128 * batch_size / (base * 9)),
                    "t_tg_s": _number(64 * batch_size / tg),
                }
            )
        return measured

    names = [variant.name for variant in variants]
    runs = protocol_payloads.interleaved_runs(names, REPS, rows)
    looped = rng.random() < degenerate_share
    return protocol_payloads.submission(
        nonce=uuid.uuid4().hex,  # fresh on every run, so a rerun on the same database is never a retry
        campaign=CAMPAIGN,
        machine={
            **protocol_payloads.MACHINE,
            "chip": chip,
            "gpu_name": chip,
            "gpu_cores": gpu_cores,
            "memory_bytes": memory_gib * 2**30,
        },
        model=model,
        variants=[
            {"name": variant.name, "commit": COMMIT, "patches": variant.patches, "env": variant.env}
            for variant in variants
        ],
        runs=runs,
        batch_sizes=BATCH_SIZES,
        looped={name: looped for name in names[1:]},
    )


# The chips without a published bandwidth are bounded by a ceiling above any GPU's; a crowd's Mac is not.
TYPICAL_BYTES_PER_S = 300e9


def decode_bound(chip: str, model: dict[str, Any]) -> float:
    """Batch-1 decode rate at the chip's memory bandwidth (the service's plausibility bound without its
    margin): drawing the base rate below it keeps the bench's submissions counted, not quarantined."""
    bandwidth = plausibility.bandwidth_bytes_per_s(chip)
    if bandwidth >= plausibility.CEILING_BYTES_PER_S:
        bandwidth = TYPICAL_BYTES_PER_S
    return bandwidth / sum(model["tensor_bytes_by_type"].values())


def model_facts(model_name: str, architecture: str, n_params: int, quant: str) -> dict[str, Any]:
    # Mostly the quant's own tensor type (llama.cpp's default for it), some Q4_K, a little F32.
    main_type = model_facts_rule.DEFAULT_TENSOR_TYPE[quant]
    tensors = {"F32": 1000000, "Q4_K": n_params // 8}
    tensors[main_type] = tensors.get(main_type, 0) + n_params // 3
    return {
        "file_name": f"{model_name}-{quant}.gguf",
        "sha256": hashlib.sha256(f"{model_name}/{quant}".encode()).hexdigest(),
        "size_bytes": sum(tensors.values()) + 2_000_000,  # the tensors and a GGUF header
        "architecture": architecture,
        "n_params": n_params,
        "file_type": quant,
        "label": f"{model_name} {quant}",
        "tensor_bytes_by_type": tensors,
    }
