"""The macOS machine facts read from outputs recorded on real Macs (tests/agent/fixtures/macs/*/SOURCE
says where each came from). A Mac's folder holds only what was published for that one Mac; a command
with no recorded output answers nothing, as a failed command does, and the fact must then be unknown
rather than guessed.

`system_profiler SPHardwareDataType SPDisplaysDataType -json` prints one object holding both data
types: where both were published for a Mac, the fake answer is that union of the two recorded files."""

from __future__ import annotations

from typing import Any

import jsonschema
import pytest
from benchhub_agent import machine
from benchhub_protocol.schema import MACHINE_SCHEMA

from tests.agent.macs import MACS, recorded_mac

# (folder, chip, GPU cores, performance cores, efficiency cores, memory bytes)
EXPECTED: list[tuple[str, str, int | None, int, int, int]] = [
    ("m1-pro-binned", "Apple M1 Pro", 14, 0, 0, 0),  # only its GPU was published
    ("m1-air", "Apple M1", None, 0, 0, 16 * 2**30),
    ("m1-macos11", "Apple M1", None, 0, 0, 0),  # only machdep.cpu was recorded
    ("m3-max", "unknown Mac", None, 12, 4, 137_438_953_472),  # `sysctl hw` names no chip
    ("m5-max", "Apple M5 Max", None, 18, 0, 128 * 2**30),  # Super 6 + Performance 12, no efficiency level
    ("github-runner-vm", "Apple M1 (Virtual)", None, 3, 0, 7_516_192_768),  # one level, named "Standard"
    ("m4-max", "Apple M4 Max", None, 12, 4, 64 * 2**30),  # the full 16-core part
    ("m2-air", "unknown Mac", None, 4, 4, 24 * 2**30),  # `sysctl hw` names no chip; levels have no names
    ("m4-pro-binned", "unknown Mac", None, 8, 4, 24 * 2**30),  # 12-core M4 Pro; its brand string was cut
]


@pytest.mark.parametrize(("name", "chip", "gpu_cores", "performance", "efficiency", "memory"), EXPECTED)
def test_it_reads_each_real_mac_as_published(
    name: str, chip: str, gpu_cores: int | None, performance: int, efficiency: int, memory: int
) -> None:
    facts: dict[str, Any] = machine.collect("metal", run=recorded_mac(name), system="Darwin")
    jsonschema.validate(facts, MACHINE_SCHEMA)
    assert (facts["chip"], facts["gpu_cores"]) == (chip, gpu_cores)
    assert (facts["cpu_cores_performance"], facts["cpu_cores_efficiency"]) == (performance, efficiency)
    assert facts["memory_bytes"] == memory
    assert facts["thermal"] == "unknown" and facts["power_source"] == "unknown"  # nothing recorded, nothing claimed


def test_every_mac_folder_names_its_source() -> None:
    folders = sorted(path.name for path in MACS.iterdir() if path.is_dir())
    assert folders == sorted(name for name, *_ in EXPECTED)
    for folder in folders:
        source = (MACS / folder / "SOURCE").read_text()
        assert any(where in source for where in ("https://", "repository ", "Qiita item")), folder


def test_it_counts_levels_by_name_and_not_by_position() -> None:
    three_levels = {
        "hw.nperflevels": "3",
        "hw.perflevel0.name": "Super",
        "hw.perflevel0.physicalcpu": "2",
        "hw.perflevel1.name": "Performance",
        "hw.perflevel1.physicalcpu": "4",
        "hw.perflevel2.name": "Efficiency",
        "hw.perflevel2.physicalcpu": "6",
    }
    assert machine.cpu_core_levels(three_levels) == (6, 6)
    unnamed = {"hw.perflevel0.physicalcpu": "6", "hw.perflevel1.physicalcpu": "2"}  # before names existed
    assert machine.cpu_core_levels(unnamed) == (6, 2)
    assert machine.cpu_core_levels({"hw.physicalcpu": "8"}) == (8, 0)  # an Intel Mac has no levels
