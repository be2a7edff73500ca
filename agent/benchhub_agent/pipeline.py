"""`benchhub-agent run`: from a GGUF file to a signed result in the outbox (upload is the CLI's next step)."""

from __future__ import annotations

import json
import platform
import shutil
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchhub_protocol.rounds import DEFAULT_MIN_EFFECT
from benchhub_protocol.schema import SWEEP_EXTRA_ARGS, SchemaViolation

from . import build, campaign, checks, machine, model, result, source, sweep
from .dirs import Dirs, write_atomic
from .errors import AgentError, ExitCode
from .progress import Progress
from .tools import parse_version


@dataclass(frozen=True)
class RunOptions:
    model_path: Path
    server: str | None
    campaign_slug: str
    llama_src: Path | None = None
    prebuilt: dict[str, Path] = field(default_factory=dict)  # --variant NAME=BIN_DIR
    backend: str = "auto"
    batch_sizes: tuple[int, ...] | None = None
    reps: int | None = None
    max_reps: int | None = None
    max_seconds: float | None = None
    npp: int | None = None
    ntg: int | None = None
    gen_tokens: int = 96
    cmake_args: tuple[str, ...] = ()
    label: str | None = None


@dataclass(frozen=True)
class RunResult:
    payload: dict[str, Any]
    envelope_path: Path
    result_dir: Path


def detect_backend(requested: str) -> str:
    if requested != "auto":
        return requested
    if platform.system() == "Darwin":
        return "metal"
    if shutil.which("nvidia-smi") and machine.run_quietly(["nvidia-smi", "-L"]):
        return "cuda"
    return "cpu"


def _selected_variants(plan: campaign.Campaign, prebuilt: dict[str, Path]) -> list[campaign.Variant]:
    if not prebuilt:
        return list(plan.variants)
    unknown = sorted(set(prebuilt) - {variant.name for variant in plan.variants})
    if unknown:
        names = ", ".join(variant.name for variant in plan.variants)
        raise AgentError(ExitCode.USAGE, f"--variant {unknown[0]} is not a variant of {plan.slug} ({names}).")
    if plan.baseline not in prebuilt:
        raise AgentError(ExitCode.USAGE, f"--variant must include the baseline {plan.baseline!r}: speedups are paired.")
    return [variant for variant in plan.variants if variant.name in prebuilt]


def _settings(plan: campaign.Campaign, options: RunOptions) -> sweep.SweepSettings:
    defaults = plan.sweep
    reps = options.reps or int(defaults.get("reps", 2))
    extra_args = tuple(str(arg) for arg in defaults.get("extra_args") or ())
    unknown = [arg for arg in extra_args if arg not in SWEEP_EXTRA_ARGS]
    if unknown:
        raise AgentError(
            ExitCode.CAMPAIGN,
            f"Campaign {plan.slug} asks llama-batched-bench for {unknown[0]}, which this agent does not pass: "
            "update benchhub-agent.",
        )
    return sweep.SweepSettings(
        npp=options.npp or int(defaults["npp"]),
        ntg=options.ntg or int(defaults["ntg"]),
        batch_sizes=options.batch_sizes or tuple(int(size) for size in defaults["batch_sizes"]),
        reps=reps,
        # Never past the protocol's cap: the service refuses a submission with more rounds.
        max_reps=min(max(reps, options.max_reps or sweep.DEFAULT_MAX_ROUNDS), sweep.DEFAULT_MAX_ROUNDS),
        max_seconds=options.max_seconds or float(defaults.get("max_seconds") or sweep.DEFAULT_MAX_SECONDS),
        min_effect=plan.min_effect if plan.min_effect is not None else DEFAULT_MIN_EFFECT,
        flash_attn=bool(defaults.get("flash_attn", True)),
        n_gpu_layers=int(defaults.get("n_gpu_layers", 99)),
        extra_args=extra_args,
        pinned_n_ctx=int(defaults["n_ctx"]) if defaults.get("n_ctx") else None,
    )


def _binaries(
    variants: list[campaign.Variant],
    plan: campaign.Campaign,
    options: RunOptions,
    backend: str,
    dirs: Dirs,
    logs: Path,
    progress: Progress,
) -> tuple[list[checks.VariantBinaries], dict[str, Any]]:
    """Binaries per variant, built (or found in the cache) unless the user gave them, and the build facts."""
    if options.prebuilt:
        bins = [checks.VariantBinaries(v.name, options.prebuilt[v.name], dict(v.env)) for v in variants]
        for entry in bins:
            missing = [tool for tool in build.TOOLS if not (entry.bin_dir / tool).is_file()]
            if missing:
                raise AgentError(ExitCode.USAGE, f"--variant {entry.name}: {entry.bin_dir} has no {missing[0]}.")
        done = subprocess.run([str(bins[0].bin_dir / "llama-completion"), "--version"], capture_output=True, text=True)
        compiler = parse_version(done.stderr + done.stdout)[1] or "unknown"
        # Binaries built elsewhere: the agent cannot tell which source they were compiled from.
        facts = {"repo": plan.repo, "build_type": "prebuilt", "cmake_flags": [], "compiler": compiler}
        return bins, {**facts, "source": "local"}
    config = build.BuildConfig(backend, options.cmake_args)
    commits = list(dict.fromkeys(variant.commit for variant in variants))  # the baseline's first
    if options.llama_src and len(commits) > 1:
        raise AgentError(
            ExitCode.USAGE,
            f"--llama-src is one commit, but the variants of {plan.slug} are at {len(commits)} commits: leave it out.",
        )
    built: dict[str, build.Built] = {}
    for commit in commits:
        progress.start(f"Source: llama.cpp {commit[:12]}")
        pristine = (
            source.from_user(options.llama_src, dirs) if options.llama_src else source.from_git(plan.repo, commit, dirs)
        )
        progress.start(f"Building for {backend} (cached by source tree, patches, flags and compiler)")
        group = [variant for variant in variants if variant.commit == commit]
        for item in build.build_variants(group, pristine, config, dirs, logs, progress.update):
            built[item.variant] = item
            progress.note(f"  {item.variant}: {'cached, nothing built' if item.cached else 'built'} -> {item.bin_dir}")
    bins = [checks.VariantBinaries(v.name, built[v.name].bin_dir, dict(v.env)) for v in variants]
    facts = {
        "repo": plan.repo,
        "build_type": "Release",
        "cmake_flags": config.flags,
        "compiler": build.compiler_version(),
        # "local": built from --llama-src, not from the pinned commit's git tree; the service flags it.
        "source": "local" if options.llama_src else "pinned",
    }
    return bins, facts


def run_state_flags(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    flags = []
    if "battery" in (before["power_source"], after["power_source"]):
        flags.append("on_battery")
    if before["low_power_mode"] or after["low_power_mode"]:
        flags.append("low_power_mode")
    if "pressure" in (before["thermal"], after["thermal"]):
        flags.append("thermal_pressure")
    return flags


def run(options: RunOptions, plan: campaign.Campaign, dirs: Dirs, progress: Progress) -> RunResult:
    """`plan` was loaded, checked and trusted before this (cli.run): nothing here runs before that."""
    campaign.require_pinned(plan)  # checked at loading too; here again, before anything is read or built
    progress.start("Reading the model")
    model_facts = model.model_facts(options.model_path, dirs, options.label)
    progress.note(
        f"  {model_facts['file_name']}: {model_facts['architecture']}, {model_facts['file_type']}, "
        f"{model_facts['n_params']:,} parameters, sha256 {model_facts['sha256'][:12]}"
    )
    variants = _selected_variants(plan, options.prebuilt)
    backend = detect_backend(options.backend)
    settings = _settings(plan, options)
    for difference in sweep.planned_differences(settings, plan.sweep):
        progress.note(f"  Not the campaign's sweep ({difference}): the service will keep this result out of its cells.")
    stamp = time.strftime("%Y%m%d-%H%M%S")
    result_dir = dirs.results / f"{stamp}-{model_facts['file_name'].removesuffix('.gguf')}"
    logs = result_dir / "logs"
    bins, llama_cpp = _binaries(variants, plan, options, backend, dirs, logs, progress)

    progress.start("Reading the machine")
    machine_facts = machine.collect(backend)
    before = {key: machine_facts[key] for key in ("power_source", "low_power_mode", "thermal")}

    progress.start("Correctness (test-backend-ops -o MUL_MAT)")
    op = "MUL_MAT"
    correctness = []
    for entry in bins:
        progress.update(entry.name)
        correctness.append(checks.correctness(entry, backend, op, logs))

    progress.start("Sweep")
    progress.note(
        f"  llama-batched-bench, batch sizes {','.join(map(str, settings.batch_sizes))}: whole cycles of "
        f"{len(bins)} rounds until every cell's verdict is settled at ±{settings.min_effect * 100:g}%, "
        f"at most {settings.max_reps} rounds or {settings.max_seconds / 60:.0f} min"
    )
    runs, sweep_flags, states, stop = sweep.run_sweep(
        [(b.name, b.bin_dir, b.env) for b in bins],
        options.model_path,
        settings,
        logs,
        progress.update,
        sample_state=machine.run_state,
        require_offload=checks.DEVICES.get(backend),
    )
    worst = machine.worst_run_state([before, *states, machine.run_state()])
    machine_facts.update(worst)

    progress.start("Generation check (greedy completions)")
    generation = checks.generation(
        bins, options.model_path, options.gen_tokens, settings.n_gpu_layers, logs, progress.update
    )
    progress.finish()
    try:
        payload = result.assemble(
            campaign=plan.slug,
            campaign_digest=plan.digest or None,
            machine=machine_facts,
            model=model_facts,
            llama_cpp=llama_cpp,
            variants=[variant.as_payload() for variant in variants],
            sweep={**settings.as_payload(runs), **stop},
            correctness=correctness,
            generation=generation,
            flags=[*sweep_flags, *checks.flags_of(correctness, generation), *run_state_flags(worst, worst)],
        )
    except SchemaViolation as error:
        raise AgentError(
            ExitCode.FAILURE, f"The result does not fit schema v1 at {error.field}: {error.detail}"
        ) from error
    write_atomic(result_dir / "payload.json", json.dumps(payload, indent=1).encode())
    return RunResult(payload, result_dir / "envelope.json", result_dir)
