"""Correctness (test-backend-ops on the device backend) and the greedy generation check, per variant."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .repetition import is_degenerate, repetition_score
from .tools import parse_completion_token_count, parse_test_backend_ops, run_tool

DEVICES = {"metal": "MTL0", "cuda": "CUDA0", "vulkan": "Vulkan0"}
CPU_ONLY_REASON = (
    "CPU-only build: test-backend-ops checks a device backend against the CPU, and this build has no "
    "device backend, so nothing was compared"
)
PROMPTS = (
    ("ocean", "Write a short paragraph about the ocean."),
    ("planets", "List the planets of the solar system in order from the Sun:"),
    ("code", "def fibonacci(n):"),
)


@dataclass(frozen=True)
class VariantBinaries:
    name: str
    bin_dir: Path
    env: dict[str, str]


def correctness(variant: VariantBinaries, backend: str, op: str, log_dir: Path) -> dict[str, Any]:
    entry: dict[str, Any] = {"variant": variant.name, "tool": "test-backend-ops", "op": op}
    device = DEVICES.get(backend)
    if device is None:
        return {**entry, "backend": "CPU", "status": "not_run", "passed": 0, "failed": 0, "reason": CPU_ONLY_REASON}
    args = [str(variant.bin_dir / "test-backend-ops"), "-o", op, "-b", device]
    done = run_tool(args, log_dir / f"test-backend-ops-{variant.name}", env=variant.env)
    result = parse_test_backend_ops(done.stdout, done.stderr, done.exit_code, device)
    entry.update(backend=device, status=result.status, passed=result.passed, failed=result.failed)
    if result.reason:
        entry["reason"] = result.reason
    return entry


def completion_args(binary: Path, model: Path, prompt: str, n_predict: int, n_gpu_layers: int) -> list[str]:
    # Greedy and seeded: the same build must print the same bytes, so outputs can be compared exactly.
    return [
        str(binary), "-m", str(model), "-p", prompt, "-n", str(n_predict),
        "--temp", "0", "--top-k", "1", "-s", "1", "-no-cnv", "--no-display-prompt", "--no-warmup",
        "-ngl", str(n_gpu_layers), "-c", str(max(1024, 4 * n_predict)),
    ]  # fmt: skip


def generation(
    variants: Sequence[VariantBinaries],
    model: Path,
    n_predict: int,
    n_gpu_layers: int,
    log_dir: Path,
    report: Callable[[str, float | None], None],
) -> list[dict[str, Any]]:
    """One greedy completion per variant and prompt; the first variant is the baseline."""
    entries: list[dict[str, Any]] = []
    baseline_output: dict[str, bytes] = {}
    total = len(variants) * len(PROMPTS)
    for v_index, variant in enumerate(variants):
        for p_index, (prompt_id, prompt) in enumerate(PROMPTS):
            report(f"{variant.name} prompt {prompt_id}", (v_index * len(PROMPTS) + p_index) / total)
            args = completion_args(variant.bin_dir / "llama-completion", model, prompt, n_predict, n_gpu_layers)
            done = run_tool(args, log_dir / f"completion-{variant.name}-{prompt_id}", env=variant.env)
            output = done.stdout.encode()
            if v_index == 0:
                baseline_output[prompt_id] = output
            score = repetition_score(done.stdout)
            tokens = parse_completion_token_count(done.stderr)
            entries.append(
                {
                    "variant": variant.name,
                    "prompt_id": prompt_id,
                    "n_tokens": tokens if tokens is not None else 0,
                    "output_sha256": hashlib.sha256(output).hexdigest(),
                    # A crash or an empty answer is no usable output either: it must not pass as healthy.
                    "degenerate": is_degenerate(score) or done.exit_code != 0 or not done.stdout.strip(),
                    "repetition_score": score,
                    "identical_to_baseline": output == baseline_output[prompt_id],
                }
            )
    return entries


def flags_of(correctness_entries: Sequence[dict[str, Any]], generation_entries: Sequence[dict[str, Any]]) -> list[str]:
    flags = []
    if any(entry["status"] == "fail" for entry in correctness_entries):
        flags.append("correctness_failed")
    if any(entry["degenerate"] for entry in generation_entries):
        flags.append("degenerate_output")
    if not all(entry["identical_to_baseline"] for entry in generation_entries):
        flags.append("variant_output_mismatch")
    return flags
