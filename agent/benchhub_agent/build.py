"""CMake builds of llama.cpp per variant and backend, cached and shared.

One build directory per (backend, flags, compiler) serves every variant, whatever its commit: variants
differ by a few patched files or by what their commits change, so after the first only those
recompile. The binaries of each variant are then copied into a cache keyed by everything that shapes
them: the git tree id of the source actually compiled (worktree.snapshot, so a --llama-src checkout
with local edits or a tarball of another version is never reused as the pinned commit), its patches,
the backend, the flags, the compiler and the targets. A second run with the same inputs builds
nothing. Static linking (BUILD_SHARED_LIBS=OFF) makes each copied binary self-contained.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import re
import shutil
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from .campaign import Variant
from .dirs import Dirs, write_atomic
from .errors import AgentError, ExitCode
from .source import locked
from .tools import exit_line, parse_version, waited_seconds
from .worktree import WorkTree, snapshot

TOOLS = ("llama-batched-bench", "test-backend-ops", "llama-completion")
BASE_FLAGS = (
    "-DCMAKE_BUILD_TYPE=Release",
    "-DBUILD_SHARED_LIBS=OFF",
    "-DLLAMA_OPENSSL=OFF",
    "-DLLAMA_BUILD_SERVER=OFF",
)
# GGML_NATIVE stays at its default (ON): the result describes this machine, the binaries never leave
# it, and a non-native x86 build would measure a CPU without AVX2 that nobody runs.
BACKEND_FLAGS = {
    "metal": ("-DGGML_METAL=ON", "-DGGML_METAL_EMBED_LIBRARY=ON"),
    "cuda": ("-DGGML_CUDA=ON",),
    "cpu": ("-DGGML_METAL=OFF", "-DGGML_CUDA=OFF"),
}
# On x86-64 the native build leaves out AMX: the pinned commit's AMX kernels died with an illegal
# instruction (tileloadd in ggml-cpu/amx/mmq.cpp) in every tool on a Sapphire Rapids machine whose
# AMX works for a plain program (2026-12-01). Both variants of an A/B are built the same way, so
# the pair stays fair; explicit -mno- flags win over -march=native whatever their order.
NO_AMX = "-mno-amx-tile -mno-amx-int8 -mno-amx-bf16"
MACHINE_FLAGS = (
    (f"-DCMAKE_C_FLAGS={NO_AMX}", f"-DCMAKE_CXX_FLAGS={NO_AMX}") if platform.machine() in ("x86_64", "AMD64") else ()
)
_PERCENT = re.compile(r"^\[\s*(\d+)%\]")
_COMPILED = re.compile(r"Building \w+ object ")
_LINKED = re.compile(r"Linking \w+ executable ")


@dataclass(frozen=True)
class BuildConfig:
    backend: str
    extra_flags: tuple[str, ...] = ()

    @property
    def flags(self) -> list[str]:
        return [*BASE_FLAGS, *BACKEND_FLAGS[self.backend], *MACHINE_FLAGS, *self.extra_flags]


@dataclass(frozen=True)
class Built:
    variant: str
    bin_dir: Path
    cached: bool  # True when nothing was compiled


def compiler_version() -> str:
    compiler = os.environ.get("CXX") or ("clang++" if platform.system() == "Darwin" else "c++")
    try:
        done = subprocess.run([compiler, "--version"], capture_output=True, text=True)
    except FileNotFoundError as error:
        raise AgentError(
            ExitCode.MISSING_TOOL, f"No C++ compiler ({compiler}): see `benchhub-agent doctor`."
        ) from error
    return done.stdout.splitlines()[0].strip() if done.stdout else compiler


def _digest(*parts: object) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()


def binary_key(variant: Variant, config: BuildConfig, compiler: str, targets: Sequence[str], source_tree: str) -> str:
    """`source_tree`: the git tree id of the pristine source (the commit is only what the variant claims)."""
    patches = [patch.sha256 for patch in variant.patches]
    return _digest(source_tree, variant.commit, patches, config.backend, config.flags, compiler, sorted(targets))[:24]


@dataclass(frozen=True)
class BuildLogSummary:
    seconds: float  # the cmake steps (configure, compile) together
    compiled: int  # objects make compiled
    linked: int  # executables make linked


def summarize_build_log(log: Path) -> BuildLogSummary:
    """What a variant's build cost, from its build log: a later variant should compile only what its patches
    (or its commit) change."""
    text = log.read_text(errors="replace")
    return BuildLogSummary(
        seconds=waited_seconds(text),
        compiled=len(_COMPILED.findall(text)),
        linked=len(_LINKED.findall(text)),
    )


def _stream(args: list[str], log: Path, on_line: Callable[[str], None]) -> int:
    with log.open("a") as out:
        out.write(f"$ {' '.join(args)}\n")
        out.flush()
        try:
            process = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        except FileNotFoundError as error:
            raise AgentError(
                ExitCode.MISSING_TOOL, f"{args[0]} is not installed: see `benchhub-agent doctor`."
            ) from error
        assert process.stdout is not None
        started = time.monotonic()
        try:
            for line in process.stdout:
                out.write(line)
                on_line(line)
            code = process.wait()
            out.write(exit_line(code, time.monotonic() - started))  # read by summarize_build_log
            return code
        except BaseException:
            process.kill()
            process.wait()
            raise


def build_variants(
    variants: Sequence[Variant],
    pristine: Path,
    config: BuildConfig,
    dirs: Dirs,
    log_dir: Path,
    report: Callable[[str, float | None], None],
    targets: Sequence[str] = TOOLS,
) -> list[Built]:
    compiler = compiler_version()
    store = dirs.sources / "trees.git"
    report("reading the source tree", None)
    source_tree = snapshot(pristine, store)
    built: list[Built] = []
    for variant in variants:
        key = binary_key(variant, config, compiler, targets, source_tree)
        bin_dir = dirs.binaries / key
        if all((bin_dir / target).is_file() for target in targets):
            built.append(Built(variant.name, bin_dir, cached=True))
            continue
        root = dirs.builds / f"{config.backend}-{_digest(config.backend, config.flags, compiler)[:16]}"
        with locked(root.with_suffix(".lock")):
            tree = WorkTree(pristine, root / "src", store)
            _build_one(variant, tree, root / "build", config, targets, log_dir, report)
            partial = bin_dir.with_name(bin_dir.name + ".partial")
            shutil.rmtree(partial, ignore_errors=True)
            partial.mkdir(parents=True)
            for target in targets:
                store_once(root / "build" / "bin" / target, partial / target, dirs.binaries / "by-sha256")
            info = {
                "variant": variant.as_payload(),
                "backend": config.backend,
                "flags": config.flags,
                "compiler": compiler,
                "source_tree": source_tree,
            }
            write_atomic(partial / "build.json", json.dumps(info, indent=1).encode())
            shutil.rmtree(bin_dir, ignore_errors=True)
            partial.rename(bin_dir)
        _check_commit(variant, bin_dir)
        built.append(Built(variant.name, bin_dir, cached=False))
    return built


def _build_one(
    variant: Variant,
    tree: WorkTree,
    build_dir: Path,
    config: BuildConfig,
    targets: Sequence[str],
    log_dir: Path,
    report: Callable[[str, float | None], None],
) -> None:
    log = log_dir / f"build-{variant.name}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    tree.ensure()
    tree.apply(variant.patches)
    try:
        if not (build_dir / "CMakeCache.txt").is_file():
            report(f"{variant.name}: configuring", None)
            args = ["cmake", "-S", str(tree.path), "-B", str(build_dir), *config.flags]
            if _stream(args, log, lambda line: None) != 0:
                shutil.rmtree(build_dir, ignore_errors=True)  # a half-configured cache would poison the next run
                raise AgentError(ExitCode.BUILD, f"CMake configure failed for {variant.name}: see {log}.")

        highest = 0

        def on_line(line: str) -> None:
            # CMake restarts its percentage for each requested target: only progress beyond the highest
            # seen so far moves the display, so the ETA never jumps backwards.
            nonlocal highest
            percent = _PERCENT.match(line)
            if percent and int(percent.group(1)) > highest:
                highest = int(percent.group(1))
                report(f"{variant.name}: compiling {highest}%", highest / 100)

        jobs = str(os.cpu_count() or 2)
        args = ["cmake", "--build", str(build_dir), "--config", "Release", "-j", jobs, "--target", *targets]
        if _stream(args, log, on_line) != 0:
            raise AgentError(ExitCode.BUILD, f"The build of {variant.name} failed: see {log}.")
    finally:
        # The tree goes back to pristine whatever happened, so the next variant starts from upstream.
        tree.restore()


def store_once(source: Path, destination: Path, store: Path) -> None:
    """Copy a built binary into the cache, once per content: variants whose patches compile to the same
    binary (Metal-only patches on CUDA) share one file through hard links. A copy where links fail."""
    digest = hashlib.sha256()
    with open(source, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    kept = store / digest.hexdigest()
    if not kept.is_file():
        store.mkdir(parents=True, exist_ok=True)
        partial = kept.with_name(kept.name + ".partial")
        shutil.copy2(source, partial)
        partial.replace(kept)
    try:
        os.link(kept, destination)
    except OSError:
        shutil.copy2(kept, destination)


def _check_commit(variant: Variant, bin_dir: Path) -> None:
    """The binary's own version banner must name the variant's commit when it names one. A tree without
    .git (an export, a tarball) prints `unknown`, which proves nothing: the source tree id in the cache
    key and `llama_cpp.source` in the payload are what tell such a tree from the pinned commit."""
    completion = bin_dir / "llama-completion"
    if not completion.is_file():
        return
    done = subprocess.run([str(completion), "--version"], capture_output=True, text=True)
    short, _ = parse_version(done.stderr + done.stdout)
    if short and short != "unknown" and not variant.commit.startswith(short):
        raise AgentError(
            ExitCode.SOURCE,
            f"The source tree is llama.cpp {short}, but variant {variant.name} pins {variant.commit[:12]}.",
        )
