"""`doctor` on recorded real Macs: the chip, backend and server it reports, and every reading it could
not take marked as a warning, not as fine. The run state on a Mac: thermal from the OS's own thermal
state (a reading that says nominal, or unknown), and the worst state of several readings."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
from benchhub_agent import doctor, machine
from benchhub_agent.cli import main
from click.testing import CliRunner

from tests.agent.loopback import HostileServer, running
from tests.agent.macs import recorded_mac


def by_name(checks: list[doctor.Check]) -> dict[str, doctor.Check]:
    return {check.name: check for check in checks}


def test_it_reports_the_chip_and_gpu_of_a_real_mac_and_warns_on_what_it_could_not_read() -> None:
    found = by_name(doctor.machine_checks("metal", recorded_mac("m1-pro-binned"), "Darwin"))
    assert found["GPU"].mark == "ok " and found["GPU"].detail == "Apple M1 Pro, 14 cores"
    assert found["backend"].detail == "metal"
    # Only its GPU was published: no CPU levels, no power source, no thermal state.
    assert found["chip"].mark == "warn" and found["chip"].detail.startswith("Apple M1 Pro (0 performance")
    assert [found[name].mark for name in ("power", "low power mode", "thermal")] == ["warn"] * 3


def test_it_warns_when_a_mac_gives_no_chip_name_or_gpu_cores() -> None:
    found = by_name(doctor.machine_checks("metal", recorded_mac("m3-max"), "Darwin"))
    assert found["chip"].mark == "warn" and "unknown Mac" in found["chip"].detail
    assert found["GPU"].mark == "warn"
    assert all(check.ok for check in found.values())  # warnings, not failures


def test_it_fails_a_python_under_rosetta() -> None:
    mac = recorded_mac("m5-max")

    def translated(args: list[str]) -> str | None:
        return "1\n" if args == ["sysctl", "-n", "sysctl.proc_translated"] else mac(args)

    found = by_name(doctor.machine_checks("metal", translated, "Darwin"))
    assert found["native Python"].mark == "FIX" and "arm64 Python" in found["native Python"].fix
    assert found["chip"].detail == "Apple M5 Max (18 performance, 0 efficiency cores)"


@pytest.fixture
def server() -> Iterator[HostileServer]:
    with running() as serving:
        yield serving


def test_it_says_whether_the_server_answers(server: HostileServer) -> None:
    assert doctor.server_check(server.url).mark == "ok "
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{probe.getsockname()[1]}"
    unreachable = doctor.server_check(closed)
    assert unreachable.mark == "FIX" and "Could not reach" in unreachable.detail
    assert doctor.server_check(None).mark == "warn"


def test_doctor_prints_warnings_as_warnings(server: HostileServer) -> None:
    answer = CliRunner().invoke(main, ["doctor", "--backend", "cpu", "--server", server.url])
    assert f"[ok ] server: {server.url} answered" in answer.output
    assert "[ok ] backend: cpu" in answer.output and "[ok ] chip: " in answer.output
    # This Linux machine reports no thermal state: a warning, never "ok".
    assert "[warn] thermal: thermal state: unknown" in answer.output


def darwin(outputs: dict[str, str]) -> machine.Runner:
    def run(args: list[str]) -> str | None:
        return outputs.get(args[0] if args[0] != "pmset" else " ".join(args))

    return run


def test_it_reads_the_thermal_state_the_os_reports_and_nothing_else() -> None:
    calm = darwin({"osascript": "0\n", "pmset -g batt": "Now drawing from 'AC Power'\n"})
    assert machine.run_state(calm, "Darwin")["thermal"] == "nominal"
    assert machine.run_state(darwin({"osascript": "2\n"}), "Darwin")["thermal"] == "pressure"
    silent = darwin({"pmset -g therm": "Note: No thermal warning level has been recorded\n"})
    assert machine.run_state(silent, "Darwin")["thermal"] == "unknown"  # Apple silicon's pmset says nothing
    throttled = darwin({"pmset -g therm": "CPU_Scheduler_Limit \t= 80\nCPU_Speed_Limit \t= 62\n"})
    assert machine.run_state(throttled, "Darwin")["thermal"] == "pressure"


def test_it_records_the_worst_of_several_readings() -> None:
    calm = {"power_source": "ac", "low_power_mode": False, "thermal": "nominal"}
    hot = {**calm, "thermal": "pressure"}
    unread = {"power_source": "unknown", "low_power_mode": None, "thermal": "unknown"}
    unplugged = {**calm, "power_source": "battery", "low_power_mode": True}
    assert machine.worst_run_state([calm, calm]) == calm
    assert machine.worst_run_state([calm, hot, calm]) == hot
    assert machine.worst_run_state([calm, unread]) == unread
    assert machine.worst_run_state([unplugged, hot, unread]) == {
        "power_source": "battery",
        "low_power_mode": True,
        "thermal": "pressure",
    }
    assert machine.worst_run_state([]) == unread


def _linux_runner(nvidia_smi: str | None) -> machine.Runner:
    def run(command: list[str]) -> str | None:
        return nvidia_smi if command[0] == "nvidia-smi" else None

    return run


def test_on_cuda_the_gpu_names_the_row_and_the_cpu_is_recorded_beside_it() -> None:
    # What `nvidia-smi --query-gpu=name,memory.total --format=csv,noheader,nounits` printed on the H200.
    facts = machine.collect("cuda", _linux_runner("NVIDIA H200, 143771\n"), "Linux")
    assert facts["chip"] == "NVIDIA H200 (140 GiB)" and facts["gpu_name"] == "NVIDIA H200"
    assert facts["gpu_memory_bytes"] == 143771 * 2**20 and facts["cpu"]


def test_doctor_says_unknown_where_it_could_not_read_the_gpu() -> None:
    found = by_name(doctor.machine_checks("cuda", _linux_runner(None), "Linux"))
    assert found["GPU"].mark == "warn" and found["GPU"].detail == "unknown, unknown cores"


def test_doctor_checks_the_compiler_cmake_will_use(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("CXX", "/nowhere/g++-real")
    found = by_name(doctor.checks(tmp_path, "cpu", None))
    assert found["C++ compiler (/nowhere/g++-real)"].mark == "FIX"
