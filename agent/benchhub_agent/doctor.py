"""`benchhub-agent doctor`: what a run needs that this machine lacks, each with its fix, and what the
agent would report about this machine. A reading the agent could not take (an unknown chip, power
source or thermal state) is a warning: it would be published as unknown, never as fine."""

from __future__ import annotations

import os
import platform
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from . import client, machine
from .errors import AgentError

MIN_FREE_BYTES = 5 * 1024**3  # source (~0.2 GB), one build tree (~1-2 GB) and the binaries of three variants


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str
    fix: str = ""
    warn: bool = False  # shown, and not a failure: something the agent could not read or was not told

    @property
    def mark(self) -> str:
        return "FIX" if not self.ok else "warn" if self.warn else "ok "


def _reading(name: str, detail: str, unknown: bool, fix: str) -> Check:
    return Check(name, True, detail, fix if unknown else "", warn=unknown)


def _version(args: list[str]) -> str | None:
    try:
        done = subprocess.run(args, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    text = (done.stdout or done.stderr).strip()
    return text.splitlines()[0] if done.returncode == 0 and text else None


def _install_hint(package: str) -> str:
    return f"brew install {package}" if platform.system() == "Darwin" else f"sudo apt-get install {package}"


def checks(cache_dir: Path, backend: str, server: str | None = None) -> list[Check]:
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
        # The compiler CMake will pick (and the build's cache key names): $CXX where set, else c++.
        chosen = os.environ.get("CXX") or "c++"
        compiler = _version([chosen, "--version"])
        results.append(Check(f"C++ compiler ({chosen})", bool(compiler), compiler or "not found", _install_hint("g++")))
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
    return [*results, *machine_checks(backend), server_check(server)]


def machine_checks(backend: str, run: machine.Runner = machine.run_quietly, system: str | None = None) -> list[Check]:
    """What a run would report about this machine, and whether the agent can measure it at all."""
    translated = machine.translated(run, system)
    facts = machine.collect(backend, run, system)
    gpu = f"{facts['gpu_name'] or 'unknown'}, {facts['gpu_cores'] or 'unknown'} cores"
    return [
        Check(
            "native Python",
            not translated,
            "x86 under Rosetta" if translated else facts["arch"],
            "install an arm64 Python and reinstall benchhub-agent with it",
        ),
        _reading(
            "chip",
            f"{facts['chip']} ({facts['cpu_cores_performance']} performance, "
            f"{facts['cpu_cores_efficiency']} efficiency cores)",
            facts["chip"].startswith("unknown") or not facts["cpu_cores_performance"],
            "the chip could not be read: results will say so",
        ),
        Check("backend", True, backend),
        Check("GPU", True, "not used: the cpu backend measures the CPU")
        if backend == "cpu"
        else _reading(
            "GPU",
            gpu,
            not facts["gpu_name"] or facts["gpu_cores"] is None,
            "the GPU could not be read fully: results will say unknown",
        ),
        _power_check(facts),
        Check(
            "low power mode",
            not facts["low_power_mode"],
            f"low power mode: {_said(facts['low_power_mode'])}",
            "turn Low Power Mode off in System Settings > Battery"
            if facts["low_power_mode"]
            else "could not be read: results will say unknown",
            warn=facts["low_power_mode"] is None,
        ),
        Check(
            "thermal",
            facts["thermal"] != "pressure",
            f"thermal state: {facts['thermal']}",
            "let the machine cool down; close heavy apps"
            if facts["thermal"] == "pressure"
            else "could not be read: results will say unknown",
            warn=facts["thermal"] == "unknown",
        ),
    ]


def _said(value: object) -> str:
    return "unknown" if value is None else "on" if value else "off"


def _power_check(facts: dict[str, object]) -> Check:
    source = facts["power_source"]
    if source == "battery":
        return Check(
            "power", False, "power source: battery", "plug in: on battery macOS slows the GPU (flagged on_battery)"
        )
    return _reading("power", f"power source: {source}", source == "unknown", "could not be read")


def server_check(server: str | None) -> Check:
    if not server:
        return Check("server", True, "none given", "pass --server URL or set BENCHHUB_SERVER to publish", warn=True)
    try:
        response = client.get_json(server, "/api/v1/campaigns/")
    except AgentError as error:
        return Check("server", False, error.message, "check the --server URL and your network")
    if response.status != 200:
        return Check("server", False, f"{server} answered HTTP {response.status}", "check the --server URL")
    return Check("server", True, f"{server} answered")
