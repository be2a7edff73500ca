"""Facts about the machine (PROTOCOL 4.2) and its run state (power, thermal), from the OS's own tools.

Parsers are pure functions over what the tools print; `collect` runs the tools. macOS parsers are
tested on outputs recorded on real Macs (tests/agent/fixtures/macos/README.md says where from).
"""

from __future__ import annotations

import json
import os
import platform
import re
import subprocess
from collections.abc import Callable
from typing import Any

Runner = Callable[[list[str]], str | None]


def run_quietly(args: list[str]) -> str | None:
    """stdout of a command, or None when it is missing or fails: a fact we cannot read is 'unknown'."""
    try:
        done = subprocess.run(args, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout if done.returncode == 0 else None


def parse_sysctl(text: str) -> dict[str, str]:
    values = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep:
            values[key.strip()] = value.strip()
    return values


def parse_displays(text: str) -> tuple[str, int | None]:
    """(GPU name, GPU core count) from `system_profiler SPDisplaysDataType -json`; the first GPU with a
    core count wins (Apple silicon), else the first GPU. `_name` can be an internal key, so the model
    name comes from `sppci_model`."""
    try:
        entries = json.loads(text).get("SPDisplaysDataType") or []
    except (ValueError, AttributeError):
        return "", None
    gpus = [entry for entry in entries if isinstance(entry, dict)]
    if not gpus:
        return "", None
    chosen = next((gpu for gpu in gpus if str(gpu.get("sppci_cores", "")).isdigit()), gpus[0])
    cores = str(chosen.get("sppci_cores", ""))
    return str(chosen.get("sppci_model") or chosen.get("_name") or ""), int(cores) if cores.isdigit() else None


def parse_sw_vers(text: str) -> tuple[str, str]:
    values = parse_sysctl(text)
    return values.get("ProductVersion", ""), values.get("BuildVersion", "")


def parse_power_source(text: str | None) -> str:
    if not text:
        return "unknown"
    if "'AC Power'" in text:
        return "ac"
    if "'Battery Power'" in text:
        return "battery"
    return "unknown"


_LIMIT = re.compile(r"CPU_(?:Speed|Scheduler)_Limit\s*=\s*(\d+)")


def parse_thermal(text: str | None) -> str:
    """`pmset -g therm`: a speed or scheduler limit under 100 means macOS is throttling for heat."""
    if not text:
        return "unknown"
    if any(int(limit) < 100 for limit in _LIMIT.findall(text)):
        return "pressure"
    if re.search(r"(?:thermal|performance) warning level\s*[:=]?\s*[1-9]", text, re.I):
        return "pressure"
    return "nominal"


def parse_low_power_mode(text: str | None) -> bool | None:
    """`pmset -g` lists `lowpowermode 1` (older macOS) or `powermode 1` when Low Power Mode is on."""
    if not text:
        return None
    match = re.search(r"^\s*(?:lowpowermode|powermode)\s+(\d+)", text, re.M)
    return match.group(1) == "1" if match else None


def parse_cpuinfo(text: str) -> tuple[str, int]:
    """(CPU model, physical cores) from /proc/cpuinfo; cores fall back to the processor count."""
    model = ""
    cores: set[tuple[str, str]] = set()
    physical = core = ""
    processors = 0
    for line in text.splitlines():
        key, _, value = (part.strip() for part in line.partition(":"))
        if key == "model name" and not model:
            model = value
        elif key == "processor":
            processors += 1
        elif key == "physical id":
            physical = value
        elif key == "core id":
            core = value
            cores.add((physical, core))
    return model or platform.processor() or "unknown CPU", len(cores) or processors


def parse_meminfo(text: str) -> int:
    match = re.search(r"^MemTotal:\s+(\d+) kB", text, re.M)
    return int(match.group(1)) * 1024 if match else 0


def parse_nvidia_smi_query(text: str | None) -> tuple[str, int | None]:
    """First line of `nvidia-smi --query-gpu=name --format=csv,noheader`; CUDA cores are not reported."""
    name = (text or "").strip().splitlines()[0].strip() if (text or "").strip() else ""
    return name, None


def run_state(run: Runner = run_quietly, system: str | None = None) -> dict[str, Any]:
    """Power source, Low Power Mode and thermal state: read before and after the sweep."""
    if (system or platform.system()) != "Darwin":
        return {"power_source": _linux_power_source(), "low_power_mode": None, "thermal": "unknown"}
    return {
        "power_source": parse_power_source(run(["pmset", "-g", "batt"])),
        "low_power_mode": parse_low_power_mode(run(["pmset", "-g"])),
        "thermal": parse_thermal(run(["pmset", "-g", "therm"])),
    }


def _linux_power_source() -> str:
    supplies = "/sys/class/power_supply"
    try:
        names = os.listdir(supplies)
    except OSError:
        return "unknown"
    for name in names:
        try:
            with open(f"{supplies}/{name}/type") as kind, open(f"{supplies}/{name}/online") as online:
                if kind.read().strip() == "Mains":
                    return "ac" if online.read().strip() == "1" else "battery"
        except OSError:
            continue
    return "unknown"


def collect(backend: str, run: Runner = run_quietly, system: str | None = None) -> dict[str, Any]:
    """`system` ("Darwin"/"Linux") defaults to this machine's; tests pass it with recorded outputs."""
    system = system or platform.system()
    facts = _macos(run) if system == "Darwin" else _linux(backend, run)
    return {**facts, "backend": backend, **run_state(run, system)}


def _macos(run: Runner) -> dict[str, Any]:
    keys = [
        "machdep.cpu.brand_string",
        "hw.memsize",
        "hw.perflevel0.physicalcpu",
        "hw.perflevel1.physicalcpu",
        "hw.physicalcpu",
    ]
    sysctl = parse_sysctl(run(["sysctl", *keys]) or "")
    gpu_name, gpu_cores = parse_displays(run(["system_profiler", "SPDisplaysDataType", "-json"]) or "")
    version, build = parse_sw_vers(run(["sw_vers"]) or "")
    performance = sysctl.get("hw.perflevel0.physicalcpu") or sysctl.get("hw.physicalcpu") or "0"
    facts: dict[str, Any] = {
        "os": "macOS",
        "os_version": version or platform.mac_ver()[0],
        "arch": platform.machine(),
        "chip": sysctl.get("machdep.cpu.brand_string") or "unknown Mac",
        "cpu_cores_performance": int(performance),
        "cpu_cores_efficiency": int(sysctl.get("hw.perflevel1.physicalcpu") or 0),
        "gpu_name": gpu_name,
        "gpu_cores": gpu_cores,
        "memory_bytes": int(sysctl.get("hw.memsize") or 0),
    }
    if build:
        facts["os_build"] = build
    return facts


def _read(path: str) -> str:
    try:
        with open(path) as handle:
            return handle.read()
    except OSError:
        return ""


def _linux(backend: str, run: Runner) -> dict[str, Any]:
    chip, cores = parse_cpuinfo(_read("/proc/cpuinfo"))
    gpu_name, gpu_cores = ("", None)
    if backend == "cuda":
        gpu_name, gpu_cores = parse_nvidia_smi_query(run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"]))
    os_release = dict(re.findall(r'^(\w+)="?([^"\n]*)"?$', _read("/etc/os-release"), re.M))
    return {
        "os": "Linux",
        "os_version": os_release.get("PRETTY_NAME") or platform.release(),
        "os_build": platform.release(),
        "arch": platform.machine(),
        "chip": chip,
        "cpu_cores_performance": cores,
        "cpu_cores_efficiency": 0,
        "gpu_name": gpu_name,
        "gpu_cores": gpu_cores,
        "memory_bytes": parse_meminfo(_read("/proc/meminfo")),
    }
