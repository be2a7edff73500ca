"""Real Macs' recorded outputs (tests/agent/fixtures/macs/*/SOURCE says where each came from) as the
runner machine.py calls. A Mac's folder holds only what was published for that one Mac; a command with
no recorded output answers nothing, as a failed command does.

`system_profiler SPHardwareDataType SPDisplaysDataType -json` prints one object holding both data types:
where both were published for a Mac, the answer is that union of the two recorded files."""

from __future__ import annotations

import json
from pathlib import Path

from benchhub_agent import machine

MACS = Path(__file__).parent / "fixtures" / "macs"


def recorded_mac(name: str) -> machine.Runner:
    folder = MACS / name

    def read(file: str) -> str | None:
        path = folder / file
        return path.read_text() if path.is_file() else None

    def run(args: list[str]) -> str | None:
        if args[0] == "sysctl" and args[1:] != ["-n", "sysctl.proc_translated"]:
            return read("sysctl.txt") or read("sysctl-hw.txt")
        if args[0] == "system_profiler":
            parts = [read("system_profiler-hardware.json"), read("system_profiler-displays.json")]
            found = [json.loads(part) for part in parts if part]
            return json.dumps({key: value for part in found for key, value in part.items()}) if found else None
        return None

    return run
