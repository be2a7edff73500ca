"""`benchhub-agent doctor`: what a run needs that this machine lacks, each with its fix."""

from __future__ import annotations

import platform
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from . import machine

MIN_FREE_BYTES = 5 * 1024**3  # source (~0.2 GB), one build tree (~1-2 GB) and the binaries of three variants


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str
    fix: str = ""


def _version(args: list[str]) -> str | None:
    try:
        done = subprocess.run(args, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    text = (done.stdout or done.stderr).strip()
    return text.splitlines()[0] if done.returncode == 0 and text else None


def _install_hint(package: str) -> str:
    return f"brew install {package}" if platform.system() == "Darwin" else f"sudo apt-get install {package}"


def checks(cache_dir: Path, backend: str) -> list[Check]:
    results = []
    git = _version(["git", "--version"])
    results.append(Check("git", bool(git), git or "not found", _install_hint("git")))
    cmake = _version(["cmake", "--version"])
    cmake_ok = False
    if cmake and (found := re.search(r"(\d+)\.(\d+)", cmake)):
        cmake_ok = (int(found.group(1)), int(found.group(2))) >= (3, 18)
    results.append(Check("cmake >= 3.18", cmake_ok, cmake or "not found", _install_hint("cmake")))
    if platform.system() == "Darwin":
        tools = _version(["xcode-select", "-p"])
        results.append(
            Check("Xcode command-line tools", bool(tools), tools or "not installed", "xcode-select --install")
        )
        compiler = _version(["clang++", "--version"])
        results.append(Check("C++ compiler", bool(compiler), compiler or "not found", "xcode-select --install"))
    else:
        compiler = _version(["c++", "--version"])
        results.append(Check("C++ compiler", bool(compiler), compiler or "not found", _install_hint("g++")))
    if backend == "cuda":
        nvcc = _version(["nvcc", "--version"]) and shutil.which("nvcc")
        results.append(
            Check(
                "CUDA toolkit (nvcc)",
                bool(nvcc),
                str(nvcc or "not found"),
                "install the CUDA toolkit and put nvcc on PATH",
            )
        )
    cache_dir.mkdir(parents=True, exist_ok=True)
    free = shutil.disk_usage(cache_dir).free
    results.append(
        Check(
            "disk space",
            free >= MIN_FREE_BYTES,
            f"{free / 1024**3:.1f} GB free under {cache_dir}",
            f"free at least {MIN_FREE_BYTES // 1024**3} GB, or set BENCHHUB_HOME to a larger disk",
        )
    )
    state = machine.run_state()
    results.append(
        Check(
            "power",
            state["power_source"] != "battery",
            f"power source: {state['power_source']}",
            "plug in: on battery macOS slows the GPU and the result is flagged on_battery",
        )
    )
    results.append(
        Check(
            "low power mode",
            not state["low_power_mode"],
            f"low power mode: {state['low_power_mode']}",
            "turn Low Power Mode off in System Settings > Battery",
        )
    )
    results.append(
        Check(
            "thermal",
            state["thermal"] != "pressure",
            f"thermal state: {state['thermal']}",
            "let the machine cool down; close heavy apps",
        )
    )
    return results
