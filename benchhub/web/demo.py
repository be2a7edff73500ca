"""Demo submissions for the quick start: signed envelopes built exactly as the agent builds them
and sent through the real ingest path, from demo contributors whose keys come from fixed seeds.

The numbers are plausible, not measured: curves follow the shape of the published M5 Pro sweep
(docs/campaigns.md), scaled per chip, with gains damped on older GPUs as the published M1 rows show. Every
contributor is `is_demo`, so every page labels these rows "demo". Deterministic: the same seeds,
nonces and timestamps make a second run a set of safe retries (nothing new is stored)."""

from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from benchhub_protocol import envelope, payloads
from benchhub_protocol.payloads import signed_registration, signed_submission

from benchhub.results.campaigns import resolved_variants
from benchhub.results.models import Campaign
from benchhub.web.wheel import agent_version

CAMPAIGN = "mv-ext-iquants"
BATCH_SIZES = (1, 2, 3, 4, 5, 8, 9, 12, 16)
REPS = 6  # interleaved rounds per demo run: two whole cycles of three variants
NPP, NTG, N_CTX = 128, 64, 4096
EPOCH = datetime(2026, 11, 20, 9, 0, tzinfo=UTC)

# Decode t/s on an M5 Pro for a 1.7B i-quant, per batch size (docs/campaigns.md; BS1 from the published
# 1.08x batch-amortisation factor). "01+02" adds the vectorised batch 1 and mv-ext at batch 2-3.
IQUANT_CURVES: dict[str, tuple[float, ...]] = {
    "upstream": (127.5, 124.0, 132.7, 148.0, 146.0, 137.7, 180.1, 229.2, 307.3),
    "01": (127.5, 140.1, 194.6, 209.9, 240.1, 237.7, 219.2, 246.4, 244.6),
    "01+02": (137.0, 176.0, 208.0, 212.0, 241.0, 239.0, 220.0, 247.0, 245.0),
}
# K-quants already take the mv-ext path upstream: the patches should change nothing (a null result).
KQUANT_CURVE = (118.0, 171.0, 205.0, 231.0, 246.0, 281.0, 236.0, 287.0, 361.0)


@dataclass(frozen=True)
class DemoChip:
    chip: str
    gpu_cores: int
    performance: int
    efficiency: int
    memory_gib: int
    scale: float  # throughput relative to the M5 Pro
    gain: float  # share of the M5 Pro's relative gain this GPU shows


CHIPS = (
    DemoChip("Apple M1", 8, 4, 4, 16, 0.50, 0.50),
    DemoChip("Apple M1 Pro", 16, 8, 2, 32, 0.78, 0.55),
    DemoChip("Apple M2", 10, 4, 4, 16, 0.58, 0.60),
    DemoChip("Apple M2 Max", 38, 8, 4, 64, 1.05, 0.65),
    DemoChip("Apple M3 Pro", 18, 6, 6, 36, 0.84, 0.72),
    DemoChip("Apple M3 Max", 40, 12, 4, 64, 1.15, 0.75),
    DemoChip("Apple M4", 10, 4, 6, 16, 0.66, 0.85),
    DemoChip("Apple M4 Pro", 20, 10, 4, 48, 0.95, 0.88),
    DemoChip("Apple M5 Pro", 20, 10, 4, 24, 1.00, 1.00),
)
HANDLES = ("demo-ada", "demo-bashir", "demo-chen", "demo-dagny", "demo-emeka")


@dataclass(frozen=True)
class DemoModel:
    label: str
    file_type: str
    size_bytes: int
    tensor_bytes: dict[str, int]
    relative_speed: float


MODELS = (
    DemoModel(
        "Qwen3-1.7B UD-IQ2_XXS",
        "IQ2_XXS",
        705_000_000,
        {"IQ2_XXS": 482_000_000, "IQ3_XXS": 61_000_000, "Q4_K": 98_000_000, "Q6_K": 62_000_000, "F32": 2_000_000},
        1.0,
    ),
    DemoModel(
        "Qwen3-1.7B IQ3_XXS",
        "IQ3_XXS",
        842_000_000,
        {"IQ3_XXS": 655_000_000, "Q4_K": 121_000_000, "Q6_K": 64_000_000, "F32": 2_000_000},
        0.93,
    ),
    DemoModel(
        "Qwen3-1.7B Q4_K_M",
        "Q4_K_M",
        1_107_000_000,
        {"Q4_K": 829_000_000, "Q6_K": 276_000_000, "F32": 2_000_000},
        0.80,
    ),
)


def signer_for(handle: str) -> envelope.Signer:
    return envelope.Signer.from_seed(hashlib.sha256(f"benchhub-demo-key:{handle}".encode()).digest())


def signed_demo_registration(handle: str, created_at: datetime = EPOCH) -> bytes:
    return signed_registration(signer_for(handle), handle, created_at=created_at.strftime("%Y-%m-%dT%H:%M:%SZ"))


def _curve(chip: DemoChip, model: DemoModel, variant: str) -> tuple[float, ...]:
    if model.file_type.startswith("Q"):
        return tuple(v * chip.scale * model.relative_speed for v in KQUANT_CURVE)
    base = IQUANT_CURVES["upstream"]
    target = IQUANT_CURVES[variant]
    return tuple(
        b * chip.scale * model.relative_speed * (1 + (t / b - 1) * chip.gain) for b, t in zip(base, target, strict=True)
    )


@dataclass(frozen=True)
class Trouble:
    """What goes wrong in a demo run, so excluded cells show up on the demo site too."""

    failing_variant: str | None = None
    degenerate_variant: str | None = None


def _variants(campaign: Campaign) -> list[dict[str, Any]]:
    return [
        {
            "name": variant.name,
            "commit": variant.commit or "",
            "patches": [{"name": patch.name, "sha256": patch.sha256} for patch in variant.patches],
            "env": variant.env,
        }
        for variant in resolved_variants(campaign.definition)
    ]


def _runs(chip: DemoChip, model: DemoModel, names: list[str], rng: random.Random) -> list[dict[str, Any]]:
    """Two whole rotation cycles of interleaved rounds: what a quiet machine needs for every cell's
    estimate to be within ±1%."""

    def rows(name: str, rep: int) -> list[dict[str, Any]]:
        measured = []
        for batch_size, tps in zip(BATCH_SIZES, _curve(chip, model, name), strict=True):
            tg = round(tps * rng.uniform(0.997, 1.003), 2)
            pp = round(1900.0 * chip.scale * rng.uniform(0.99, 1.01), 2)
            measured.append(payloads.sweep_row(batch_size, tg, pp, npp=NPP, ntg=NTG))
        return measured

    return payloads.interleaved_runs(names, REPS, rows)


def submission_payload(
    campaign: Campaign, chip: DemoChip, model: DemoModel, index: int, trouble: Trouble = Trouble()
) -> dict[str, Any]:
    seed = f"{chip.chip}|{model.label}|{index}"
    rng = random.Random(seed)
    variants = _variants(campaign)
    names = [variant["name"] for variant in variants]
    return payloads.submission(
        nonce=hashlib.sha256(seed.encode()).hexdigest()[:32],
        created_at=(EPOCH + timedelta(hours=7 * index, minutes=len(seed))).strftime("%Y-%m-%dT%H:%M:%SZ"),
        campaign=campaign.slug,
        agent={"name": "benchhub-agent", "version": agent_version()},  # the agent this site serves
        machine={
            **payloads.MACHINE,
            "chip": chip.chip,
            "cpu_cores_performance": chip.performance,
            "cpu_cores_efficiency": chip.efficiency,
            "gpu_name": chip.chip,
            "gpu_cores": chip.gpu_cores,
            "memory_bytes": chip.memory_gib * 2**30,
        },
        model={
            "file_name": model.label.replace(" ", "-") + ".gguf",
            "sha256": hashlib.sha256(f"demo-model:{model.label}".encode()).hexdigest(),
            "size_bytes": model.size_bytes,
            "architecture": "qwen3",
            "n_params": 1_720_574_976,
            "file_type": model.file_type,
            "label": model.label,
            "tensor_bytes_by_type": model.tensor_bytes,
        },
        llama_cpp={**payloads.LLAMA_CPP, "repo": campaign.repo},
        sweep={**payloads.SWEEP, "npp": NPP, "ntg": NTG, "n_ctx": N_CTX},
        variants=variants,
        runs=_runs(chip, model, names, rng),
        batch_sizes=BATCH_SIZES,
        statuses={trouble.failing_variant: "fail"} if trouble.failing_variant else None,
        looped={trouble.degenerate_variant: True} if trouble.degenerate_variant else None,
        output=hashlib.sha256(f"ocean|{model.label}".encode()).hexdigest(),
        flags=sorted(
            (["correctness_failed"] if trouble.failing_variant else [])
            + (["degenerate_output", "variant_output_mismatch"] if trouble.degenerate_variant else [])
        ),
    )


@dataclass(frozen=True)
class DemoRun:
    handle: str
    chip: DemoChip
    model: DemoModel
    index: int
    trouble: Trouble


def demo_runs() -> list[DemoRun]:
    """Two or three submissions per chip and i-quant from different people, one K-quant run per
    chip, and two runs that go wrong (a failed correctness check, a degenerate output)."""
    runs = []
    for chip_index, chip in enumerate(CHIPS):
        for model in MODELS:
            count = 1 if model.file_type.startswith("Q") else 2 + chip_index % 2
            for index in range(count):
                handle = HANDLES[(chip_index + index) % len(HANDLES)]
                runs.append(DemoRun(handle, chip, model, index, Trouble()))
    m2, m3_pro = CHIPS[2], CHIPS[4]
    runs.append(DemoRun(HANDLES[3], m2, MODELS[0], 9, Trouble(failing_variant="01+02")))
    runs.append(DemoRun(HANDLES[4], m3_pro, MODELS[1], 9, Trouble(degenerate_variant="01")))
    return runs


def signed_demo_run(campaign: Campaign, run: DemoRun) -> bytes:
    return signed_submission(
        submission_payload(campaign, run.chip, run.model, run.index, run.trouble), signer_for(run.handle)
    )
