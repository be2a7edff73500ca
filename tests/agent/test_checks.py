from __future__ import annotations

from pathlib import Path

from benchhub_agent import checks
from benchhub_agent.pipeline import run_state_flags


def entry(variant: str, **values: object) -> dict[str, object]:
    return {"variant": variant, **values}


def test_it_never_reports_a_cpu_only_build_as_passing(tmp_path: Path) -> None:
    result = checks.correctness(checks.VariantBinaries("01", tmp_path, {}), "cpu", "MUL_MAT", tmp_path)
    assert (result["status"], result["passed"], result["backend"]) == ("not_run", 0, "CPU")
    assert "CPU-only build" in str(result["reason"])
    assert not list(tmp_path.iterdir())  # nothing was run


def test_it_raises_a_flag_for_each_problem_the_checks_found() -> None:
    correctness = [entry("upstream", status="not_run"), entry("01", status="fail")]
    generation = [
        entry("upstream", degenerate=False, identical_to_baseline=True),
        entry("01", degenerate=True, identical_to_baseline=False),
    ]
    assert checks.flags_of(correctness, generation) == [
        "correctness_failed",
        "degenerate_output",
        "variant_output_mismatch",
    ]
    healthy = [entry("01", degenerate=False, identical_to_baseline=True)]
    assert checks.flags_of([entry("01", status="pass")], healthy) == []


def test_it_flags_battery_low_power_and_heat_seen_before_or_after_the_sweep() -> None:
    calm = {"power_source": "ac", "low_power_mode": False, "thermal": "nominal"}
    assert run_state_flags(calm, calm) == []
    hot_after = {**calm, "thermal": "pressure"}
    assert run_state_flags(calm, hot_after) == ["thermal_pressure"]
    unplugged = {"power_source": "battery", "low_power_mode": True, "thermal": "unknown"}
    assert run_state_flags(unplugged, calm) == ["on_battery", "low_power_mode"]


def test_it_asks_for_a_greedy_seeded_completion() -> None:
    args = checks.completion_args(Path("/b/llama-completion"), Path("m.gguf"), "Hi", 32, 99)
    assert args[args.index("--temp") + 1] == "0" and args[args.index("--top-k") + 1] == "1"
    assert args[args.index("-n") + 1] == "32" and "--no-display-prompt" in args
