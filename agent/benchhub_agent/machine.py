"""Facts about the machine (docs/protocol.md 4.2) and its run state (power, thermal), from the OS's own tools.

Parsers are pure functions over what the tools print; `collect` runs the tools. macOS parsers are
tested on outputs recorded on real Macs (tests/agent/fixtures/macos/README.md and each
tests/agent/fixtures/macs/*/SOURCE say where from).
"""

from __future__ import annotations

import json
import os
import platform
import re
import subprocess
from collections.abc import Callable, Iterable
from typing import Any

from benchhub_protocol.schema import safe_text

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
# NSProcessInfo.thermalState: 0 nominal, 1 fair, 2 serious, 3 critical.
THERMAL_SCRIPT = 'ObjC.import("Foundation"); $.NSProcessInfo.processInfo.thermalState'


def parse_thermal_state(text: str | None) -> str:
    """The OS's thermal state as osascript prints it. The payload knows only nominal and pressure, and
    "nominal" needs a reading that says so; "fair" (the OS has begun to cool the machine) is "pressure":
    a benchmark is a sustained load, and its numbers under any thermal measure are not nominal ones."""
    value = (text or "").strip()
    if value == "0":
        return "nominal"
    if value in ("1", "2", "3"):
        return "pressure"
    return "unknown"


def parse_thermal(text: str | None) -> str:
    """`pmset -g therm`: a speed or scheduler limit under 100, or a warning level, is pressure. It never
    says nominal: on Apple silicon it prints no limit below 100 and "No thermal warning level has been
    recorded" even while the OS throttles, so its silence is "unknown"."""
    if not text:
        return "unknown"
    if any(int(limit) < 100 for limit in _LIMIT.findall(text)):
        return "pressure"
    if re.search(r"(?:thermal|performance) warning level\s*[:=]?\s*[1-9]", text, re.I):
        return "pressure"
    return "unknown"


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
    """The first GPU's name from `nvidia-smi --query-gpu=name,memory.total --format=csv,noheader,nounits`;
    CUDA cores are not reported."""
    name = (text or "").strip().splitlines()[0].split(",")[0].strip() if (text or "").strip() else ""
    return name, None


def parse_nvidia_smi_memory(text: str | None) -> int | None:
    """The first GPU's memory in bytes from the same query (MiB there); None where it says nothing usable."""
    first = (text or "").strip().splitlines()[0] if (text or "").strip() else ""
    fields = [field.strip() for field in first.split(",")]
    if len(fields) < 2 or not fields[1].isdigit():
        return None
    return int(fields[1]) * 2**20


def device_chip(gpu_name: str, gpu_memory: int | None) -> str:
    """What names a CUDA machine's row: the GPU and its memory ("NVIDIA H200 (140 GiB)"), as the SoC does a Mac's."""
    return f"{gpu_name} ({round(gpu_memory / 2**30)} GiB)" if gpu_memory else gpu_name


def run_state(run: Runner = run_quietly, system: str | None = None) -> dict[str, Any]:
    """Power source, Low Power Mode and thermal state, read before the run and before every round."""
    if (system or platform.system()) != "Darwin":
        return {"power_source": _linux_power_source(), "low_power_mode": None, "thermal": "unknown"}
    thermal = parse_thermal_state(run(["osascript", "-l", "JavaScript", "-e", THERMAL_SCRIPT]))
    if thermal == "unknown":
        thermal = parse_thermal(run(["pmset", "-g", "therm"]))
    return {
        "power_source": parse_power_source(run(["pmset", "-g", "batt"])),
        "low_power_mode": parse_low_power_mode(run(["pmset", "-g"])),
        "thermal": thermal,
    }


# Worst last: a run is recorded in the worst state any of its readings saw.
_POWER_ORDER = ("ac", "unknown", "battery")
_LOW_POWER_ORDER = (False, None, True)
_THERMAL_ORDER = ("nominal", "unknown", "pressure")


def worst_run_state(states: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """The worst of several run_state() readings, field by field: battery over unknown over AC, Low
    Power Mode on over unknown over off, pressure over unknown over nominal. No reading is unknown."""
    readings = list(states)
    if not readings:
        return {"power_source": "unknown", "low_power_mode": None, "thermal": "unknown"}
    return {
        "power_source": max((r["power_source"] for r in readings), key=_POWER_ORDER.index),
        "low_power_mode": max((r["low_power_mode"] for r in readings), key=_LOW_POWER_ORDER.index),
        "thermal": max((r["thermal"] for r in readings), key=_THERMAL_ORDER.index),
    }


def translated(run: Runner = run_quietly, system: str | None = None) -> bool:
    """True when this process is x86 code translated by Rosetta on Apple silicon."""
    if (system or platform.system()) != "Darwin":
        return False
    return (run(["sysctl", "-n", "sysctl.proc_translated"]) or "").strip() == "1"


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
    facts = {name: safe_text(value) if isinstance(value, str) else value for name, value in facts.items()}
    return {**facts, "backend": backend, **run_state(run, system)}


def cpu_core_levels(sysctl: dict[str, str]) -> tuple[int, int]:
    """(performance, efficiency) physical cores from the perflevels macOS reports (`hw.nperflevels`,
    `hw.perflevelN.name`). A level named Efficiency counts as efficiency; every other level (Performance,
    and the Super cores of M5 Pro/Max, whose second level is named Performance) counts as performance,
    so an M5 Max reads as all performance cores, as Apple describes it. Without names (macOS before
    they existed) level 0 is performance and level 1 efficiency; without levels (Intel), all cores are
    performance."""
    levels = int(sysctl.get("hw.nperflevels") or 0) or sum(
        1 for n in range(8) if f"hw.perflevel{n}.physicalcpu" in sysctl
    )
    if not levels:
        return int(sysctl.get("hw.physicalcpu") or 0), 0
    performance = efficiency = 0
    for level in range(levels):
        cores = int(sysctl.get(f"hw.perflevel{level}.physicalcpu") or 0)
        name = sysctl.get(f"hw.perflevel{level}.name")
        if (name == "Efficiency") if name else level > 0:
            efficiency += cores
        else:
            performance += cores
    return performance, efficiency


def parse_hardware(text: str) -> dict[str, Any]:
    """The SPHardwareDataType entry of `system_profiler ... -json`, or {}."""
    try:
        entries = json.loads(text).get("SPHardwareDataType") or []
    except (ValueError, AttributeError):
        return {}
    return entries[0] if entries and isinstance(entries[0], dict) else {}


def _memory_of(hardware: dict[str, Any]) -> int:
    """`physical_memory` as system_profiler prints it ("16 GB"), or 0."""
    match = re.fullmatch(r"(\d+) GB", str(hardware.get("physical_memory", "")))
    return int(match.group(1)) * 1024**3 if match else 0


def _macos(run: Runner) -> dict[str, Any]:
    # Whole subtrees: naming one oid this Mac lacks (a perflevel an M1 does not have) fails the command.
    sysctl = parse_sysctl(run(["sysctl", "hw", "machdep"]) or "")
    profile = run(["system_profiler", "SPHardwareDataType", "SPDisplaysDataType", "-json"]) or ""
    gpu_name, gpu_cores = parse_displays(profile)
    version, build = parse_sw_vers(run(["sw_vers"]) or "")
    performance, efficiency = cpu_core_levels(sysctl)
    hardware = parse_hardware(profile)
    # On Apple silicon the GPU is part of the chip and system_profiler names it after the chip.
    apple_gpu = gpu_name if gpu_name.startswith("Apple ") else ""
    facts: dict[str, Any] = {
        "os": "macOS",
        "os_version": version or platform.mac_ver()[0],
        "arch": platform.machine(),
        "chip": sysctl.get("machdep.cpu.brand_string") or hardware.get("chip_type") or apple_gpu or "unknown Mac",
        "cpu_cores_performance": performance,
        "cpu_cores_efficiency": efficiency,
        "gpu_name": gpu_name,
        "gpu_cores": gpu_cores,
        "memory_bytes": int(sysctl.get("hw.memsize") or 0) or _memory_of(hardware),
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
    cpu, cores = parse_cpuinfo(_read("/proc/cpuinfo"))
    chip, gpu_name, gpu_cores = cpu, "", None
    extra: dict[str, Any] = {}
    if backend == "cuda":
        query = run(["nvidia-smi", "--query-gpu=name,memory.total", "--format=csv,noheader,nounits"])
        gpu_name, gpu_cores = parse_nvidia_smi_query(query)
        if gpu_name:
            # The GPU does the work, so it names the row; the CPU that drives it is recorded beside it.
            memory = parse_nvidia_smi_memory(query)
            chip = device_chip(gpu_name, memory)
            extra = {"cpu": cpu, **({"gpu_memory_bytes": memory} if memory else {})}
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
        **extra,
    }
