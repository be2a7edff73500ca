from __future__ import annotations

from collections.abc import Callable

import jsonschema
from benchhub_agent import machine
from benchhub_protocol.schema import MACHINE_SCHEMA

Recorded = Callable[[str], str]


def test_it_reads_cores_and_chip_from_a_real_m1_pro_sysctl(recorded: Recorded) -> None:
    values = machine.parse_sysctl(recorded("macos/sysctl.m1-pro.txt"))
    assert values["machdep.cpu.brand_string"] == "Apple M1 Pro"
    assert (values["hw.perflevel0.physicalcpu"], values["hw.perflevel1.physicalcpu"]) == ("6", "2")


def test_it_takes_the_gpu_model_not_the_internal_name_of_a_real_m1(recorded: Recorded) -> None:
    assert machine.parse_displays(recorded("macos/system_profiler-displays.m1.json")) == ("Apple M1", 7)
    assert machine.parse_displays(recorded("macos/system_profiler-displays.m2-max.json")) == ("Apple M2 Max", 30)


def test_it_gives_no_gpu_for_output_that_is_not_the_json_it_expects() -> None:
    assert machine.parse_displays("") == ("", None)
    assert machine.parse_displays('{"SPDisplaysDataType": []}') == ("", None)


def test_it_reads_the_power_source(recorded: Recorded) -> None:
    assert machine.parse_power_source(recorded("macos/pmset-batt.ac.txt")) == "ac"
    assert machine.parse_power_source(recorded("macos/pmset-batt.battery.txt")) == "battery"
    assert machine.parse_power_source(recorded("macos/pmset-batt.desktop.txt")) == "ac"
    assert machine.parse_power_source(None) == "unknown"


def test_it_never_reads_nominal_from_pmset_which_apple_silicon_leaves_silent(recorded: Recorded) -> None:
    assert machine.parse_thermal(recorded("macos/pmset-therm.nominal.txt")) == "unknown"
    assert machine.parse_thermal(recorded("macos/pmset-therm.throttled.txt")) == "pressure"
    assert machine.parse_thermal(None) == "unknown"


def test_it_reads_nominal_only_from_a_thermal_state_that_says_nominal() -> None:
    assert machine.parse_thermal_state("0\n") == "nominal"
    assert [machine.parse_thermal_state(f"{state}\n") for state in (1, 2, 3)] == ["pressure"] * 3
    assert machine.parse_thermal_state(None) == "unknown"
    assert machine.parse_thermal_state("execution error: Error: ReferenceError\n") == "unknown"


def test_it_reads_low_power_mode() -> None:
    assert machine.parse_low_power_mode(" lowpowermode         1\n") is True
    assert machine.parse_low_power_mode(" powermode            0\n") is False
    assert machine.parse_low_power_mode("System-wide power settings:\n") is None


def test_it_assembles_valid_facts_of_a_mac_from_recorded_outputs(recorded: Recorded) -> None:
    outputs = {
        "sysctl": recorded("macos/sysctl.m1-pro.txt") + "hw.memsize: 17179869184\n",
        "system_profiler": recorded("macos/system_profiler-displays.m2-max.json"),
        "sw_vers": recorded("macos/sw_vers.txt"),
        "pmset -g batt": recorded("macos/pmset-batt.battery.txt"),
        "pmset -g therm": recorded("macos/pmset-therm.nominal.txt"),
        "pmset -g": " lowpowermode         1\n",
    }

    def run(args: list[str]) -> str | None:
        return outputs.get(" ".join(args)) or outputs.get(args[0])

    facts = machine.collect("metal", run=run, system="Darwin")
    jsonschema.validate(facts, MACHINE_SCHEMA)
    assert facts["chip"] == "Apple M1 Pro"
    assert (facts["cpu_cores_performance"], facts["cpu_cores_efficiency"]) == (6, 2)
    assert (facts["gpu_name"], facts["gpu_cores"]) == ("Apple M2 Max", 30)
    assert (facts["os_version"], facts["os_build"]) == ("26.5", "25F71")
    assert facts["memory_bytes"] == 16 * 2**30
    assert (facts["power_source"], facts["low_power_mode"], facts["thermal"]) == ("battery", True, "unknown")


def test_it_reads_this_linux_machine_for_real() -> None:
    facts = machine.collect("cpu")
    jsonschema.validate(facts, MACHINE_SCHEMA)
    assert facts["os"] == "Linux"
    assert facts["cpu_cores_performance"] >= 1
    assert facts["memory_bytes"] > 0


def test_it_reads_the_gpu_name_from_nvidia_smi() -> None:
    assert machine.parse_nvidia_smi_query("NVIDIA H200\n") == ("NVIDIA H200", None)
    assert machine.parse_nvidia_smi_query(None) == ("", None)


def test_it_signs_only_text_the_service_accepts() -> None:
    """Names read from the machine or a GGUF header are made NFKC and stripped of control and bidi
    characters before signing: the service's schema refuses them, and would refuse the whole run."""
    from benchhub_protocol.schema import safe_text

    assert safe_text("Ａｐｐｌｅ M4\u202e Pro\x07") == "Apple M4 Pro"
    assert safe_text("Apple M4 Pro") == "Apple M4 Pro"
