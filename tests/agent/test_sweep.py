from __future__ import annotations

import dataclasses
import json
import stat
from pathlib import Path
from typing import Any

import pytest
from benchhub_agent import sweep
from benchhub_agent.errors import AgentError, ExitCode
from benchhub_agent.report import cells, table
from benchhub_agent.sweep import SweepSettings
from benchhub_agent.tools import check_offload, parse_batched_bench_jsonl
from benchhub_protocol import rounds

FIXTURES = Path(__file__).parent / "fixtures"
REFERENCE = FIXTURES / "cpu"
# A real H200 process given the batch-size list three times (-npl 1,2,4,8,1,2,4,8,1,2,4,8).
THRICE = FIXTURES / "cuda-h200" / "bb-npl-thrice.jsonl"
CAMPAIGN_SWEEP = {"npp": 128, "ntg": 32, "flash_attn": True, "n_gpu_layers": 99, "batch_sizes": [1, 2, 4], "reps": 2}


def replaying_tool(folder: Path, stdout: Path, exit_code: int) -> Path:
    """A stand-in llama-batched-bench that replays a real recorded output and exit status."""
    folder.mkdir(parents=True)
    tool = folder / "llama-batched-bench"
    tool.write_text(f"#!/bin/sh\ncat '{stdout}'\nexit {exit_code}\n")
    tool.chmod(tool.stat().st_mode | stat.S_IXUSR)
    return folder


def noisy_tool(folder: Path, speeds: list[float]) -> Path:
    """A stand-in whose n-th call prints the real H200 rows with every decode speed scaled by speeds[n]."""
    folder.mkdir(parents=True)
    for index, factor in enumerate(speeds):
        lines = []
        for line in filter(None, THRICE.read_text().splitlines()):
            record = json.loads(line)
            record["speed_tg"] *= factor
            lines.append(json.dumps(record))
        (folder / f"out{index}").write_text("\n".join(lines) + "\n")
    tool = folder / "llama-batched-bench"
    counter = folder / "count"
    count = f"n=$(cat '{counter}' 2>/dev/null || echo 0); echo $((n+1)) > '{counter}'"
    tool.write_text(f"#!/bin/sh\n{count}\ncat '{folder}/out'$n\n")
    tool.chmod(0o755)
    return folder


def settings(reps: int = 2, max_reps: int = 2, batch_sizes: tuple[int, ...] = (1, 2, 4)) -> SweepSettings:
    return SweepSettings(
        npp=128, ntg=32, batch_sizes=batch_sizes, reps=reps, max_reps=max_reps, flash_attn=True, n_gpu_layers=99
    )


def test_it_sizes_the_context_for_every_sequence_of_the_largest_batch() -> None:
    # The recorded abort: batch 16 of 128+32 tokens in a context too small for it.
    n_ctx = sweep.context_size(128, 32, [1, 2, 16])
    assert n_ctx >= 16 * (128 + 32)
    assert n_ctx % 16 == 0
    assert sweep.context_size(128, 64, [1, 2, 3, 4, 5, 8, 9, 12, 16]) == 16 * 256


def test_it_warms_up_on_the_first_two_batch_sizes_with_the_campaigns_npp_and_ntg() -> None:
    args = sweep.batched_bench_args(Path("/b/llama-batched-bench"), Path("m.gguf"), settings(batch_sizes=(1, 2, 16)))
    assert args[args.index("-npl") + 1] == "1,2,1,2,16"
    assert settings(batch_sizes=(1, 2, 16)).as_payload([])["warmup_batch_sizes"] == [1, 2]
    assert (args[args.index("-npp") + 1], args[args.index("-ntg") + 1]) == ("128", "32")
    assert args[args.index("-c") + 1] == str(sweep.context_size(128, 32, [1, 2, 16]))
    assert args[args.index("-fa") + 1] == "on" and "-kvu" in args
    assert args[args.index("-lv") + 1] == "4"  # the library's INFO lines: where offloading is said
    assert args[-2:] == ["--output-format", "jsonl"]


def test_it_keeps_the_second_pass_and_drops_the_warm_up() -> None:
    rows = parse_batched_bench_jsonl(THRICE.read_text())
    kept = sweep.measured_rows(rows[2:], [1, 2, 4], warmup=[1, 2])  # as if run with -npl 1,2,1,2,4
    assert [row["batch_size"] for row in kept] == [1, 2, 4]
    assert kept == rows[4:7]
    # The warm-up is what the issue measured: slower than the passes after it in the same process.
    assert rows[1]["tg_tps"] < kept[1]["tg_tps"]
    aborted = parse_batched_bench_jsonl((REFERENCE / "batched-bench.ctx-too-small.stdout").read_text())
    assert aborted and sweep.measured_rows(aborted, [1, 2, 16], warmup=[1, 2]) == []  # it died in its warm-up


def test_it_runs_whole_cycles_in_the_seeds_order_and_records_an_abort_with_its_exit_code(tmp_path: Path) -> None:
    good = replaying_tool(tmp_path / "good", THRICE, 0)
    aborting = replaying_tool(tmp_path / "bad", REFERENCE / "batched-bench.ctx-too-small.stdout", 134)
    seen: list[str] = []
    states = iter([{"n": 1}, {"n": 2}])
    runs, flags, sampled, stop = sweep.run_sweep(
        [("upstream", good, {}), ("01", aborting, {"GGML_X": "1"})],
        Path("m.gguf"),
        dataclasses.replace(settings(), order_seed=5),
        tmp_path / "logs",
        lambda detail, fraction: seen.append(detail),
        sample_state=lambda: next(states),
    )
    expected = [name for order in rounds.cycle_orders(["upstream", "01"], 5, 0) for name in order]
    assert [run["variant"] for run in runs] == expected and [run["rep"] for run in runs] == [1, 1, 2, 2]
    assert stop["order_seed"] == 5
    assert sampled == [{"n": 1}, {"n": 2}]  # one reading before every round
    aborted = next(run for run in runs if run["variant"] == "01")
    assert aborted["exit_code"] == 134 and aborted["rows"] == []
    kept = next(run for run in runs if run["variant"] == "upstream")
    assert sorted(row["batch_size"] for row in kept["rows"]) == [1, 2, 4]  # rows outside the sweep are dropped
    assert flags == ["target_not_reached", "sweep_row_missing"]  # 01 has no cell at all: nothing settles
    assert stop["stop_reason"] == "rounds"
    assert any("round 1 of at most 2 (cycle 1), upstream, warm-up batch 1" in detail for detail in seen)
    first_01 = next(run for run in runs if run["variant"] == "01")
    log = tmp_path / "logs" / f"batched-bench-{first_01['seq']:03d}-01-rep{first_01['rep']}.cmd"
    assert log.read_text().startswith("GGML_X=1 ")


def test_it_stops_settled_once_a_clear_change_is_known(tmp_path: Path) -> None:
    base = noisy_tool(tmp_path / "a", [1.0] * 10)
    new = noisy_tool(tmp_path / "b", [1.200, 1.201, 1.2, 1.199, 1.2, 1.2, 1.201, 1.2, 1.2, 1.2])
    runs, flags, _, stop = sweep.run_sweep(
        [("A", base, {}), ("B", new, {})], Path("m"), settings(max_reps=10), tmp_path / "l", lambda *_: None
    )
    assert len({run["rep"] for run in runs}) in (2, 4) and flags == [] and stop["stop_reason"] == "settled"


def test_it_adds_whole_cycles_while_a_cell_is_unsettled_and_flags_the_cap(tmp_path: Path) -> None:
    noise = [1.0, 1.05, 0.96, 1.03, 0.98, 1.04, 0.95, 1.02]
    base = noisy_tool(tmp_path / "a", [1.0] * 8)
    new = noisy_tool(tmp_path / "b", noise)
    runs, flags, _, stop = sweep.run_sweep(
        [("A", base, {}), ("B", new, {})], Path("m"), settings(max_reps=7), tmp_path / "l", lambda *_: None
    )
    assert len({run["rep"] for run in runs}) == 6  # the cap rounds down to whole cycles
    # The spread (3-5% between runs) is not above HIGH_SPREAD: unsettled, the spread is not high.
    assert flags == ["target_not_reached"] and stop["stop_reason"] == "rounds"


def test_it_stops_adding_cycles_when_the_next_would_end_past_the_time_budget(tmp_path: Path) -> None:
    base = noisy_tool(tmp_path / "a", [1.0] * 8)
    new = noisy_tool(tmp_path / "b", [1.0, 1.05, 0.96, 1.03, 0.98, 1.04, 0.95, 1.02])
    hurried = SweepSettings(
        npp=128, ntg=32, batch_sizes=(1, 2), reps=2, max_reps=8, flash_attn=True, n_gpu_layers=99, max_seconds=0.001
    )
    runs, flags, _, stop = sweep.run_sweep([("A", base, {}), ("B", new, {})], Path("m"), hurried, tmp_path / "l", print)
    assert len({run["rep"] for run in runs}) == 2 and "target_not_reached" in flags and stop["stop_reason"] == "time"


def test_it_runs_one_round_when_asked_and_says_that_is_not_standard(tmp_path: Path) -> None:
    good = replaying_tool(tmp_path / "good", THRICE, 0)
    runs, flags, _, stop = sweep.run_sweep(
        [("A", good, {}), ("B", good, {})], Path("m"), settings(reps=1, max_reps=10), tmp_path / "l", lambda *_: None
    )
    assert len(runs) == 2 and flags == [] and stop["stop_reason"] == "rounds"
    assert sweep.planned_differences(settings(reps=1), CAMPAIGN_SWEEP) == ["1 round instead of at least 2"]
    assert sweep.sweep_differences(settings().as_payload(runs), CAMPAIGN_SWEEP) == ["1 round instead of at least 2"]


def test_it_keeps_a_run_with_more_rounds_than_the_campaign_asks_standard() -> None:
    runs = [{"variant": v, "rep": rep, "rows": []} for rep in range(1, 7) for v in ("A", "B")]
    assert sweep.planned_differences(settings(reps=2, max_reps=10), CAMPAIGN_SWEEP) == []
    assert sweep.sweep_differences(settings().as_payload(runs), CAMPAIGN_SWEEP) == []
    # The service's page passes a stored submission's settings without its runs: no rounds to judge.
    stored = {key: value for key, value in settings().as_payload([]).items() if key != "runs"}
    assert sweep.sweep_differences(stored, CAMPAIGN_SWEEP) == []


def test_it_stops_a_device_run_whose_model_stayed_on_the_cpu(tmp_path: Path) -> None:
    good = replaying_tool(tmp_path / "good", THRICE, 0)  # its stderr is empty: no sign of any offload
    with pytest.raises(AgentError) as error:
        sweep.run_sweep(
            [("A", good, {})], Path("m"), settings(), tmp_path / "l", lambda *_: None, require_offload="MTL0"
        )
    assert error.value.code == ExitCode.DEVICE and "not on MTL0" in error.value.message


def _payload(runs: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "variants": [
            {"name": "upstream", "commit": "0c1e57098bba" + "0" * 28},
            {"name": "01", "commit": "0c1e57098bba" + "0" * 28},
        ],
        "sweep": {"batch_sizes": [4], "runs": runs},
        "model": {"file_name": "q.gguf", "file_type": "IQ2_XXS"},
        "machine": {"chip": "Apple M5 Pro", "backend": "metal"},
        "correctness": [],
        "generation": [],
        "flags": [],
    }


def test_it_shows_the_change_with_its_interval_and_verdict() -> None:
    runs = [
        {"variant": "upstream", "rep": 1, "seq": 1, "exit_code": 0, "rows": [{"batch_size": 4, "tg_tps": 148.0}]},
        {"variant": "01", "rep": 1, "seq": 2, "exit_code": 0, "rows": [{"batch_size": 4, "tg_tps": 209.0}]},
        {"variant": "01", "rep": 2, "seq": 3, "exit_code": 0, "rows": [{"batch_size": 4, "tg_tps": 210.8}]},
        {"variant": "upstream", "rep": 2, "seq": 4, "exit_code": 0, "rows": [{"batch_size": 4, "tg_tps": 148.0}]},
    ]
    text = table(_payload(runs))
    patched = next(cell for cell in cells(_payload(runs)) if cell["variant"] == "01")
    # The printed change is the site's estimate, the centre of the interval printed beside it.
    assert patched["n_cycles"] == 1 and patched["speedup"] ** 2 == pytest.approx(patched["ci_low"] * patched["ci_high"])
    low, high = (patched["ci_low"] - 1) * 100, (patched["ci_high"] - 1) * 100
    assert f"{(patched['speedup'] - 1) * 100:+.1f}%  [{low:+.1f}%, {high:+.1f}%]" in text
    # One cycle of two rounds leaves one degree of freedom, judged at the level of all 30 looks: wide.
    assert patched["verdict"] == "unclear" and "verdict at min_effect 2%" in text


def test_it_reads_a_real_cpu_run_given_the_list_twice_at_verbosity_4(recorded: Any) -> None:
    # llama.cpp 0c1e570, CPU build, Gemma 3 270M IQ2_XXS, `-npl 1,2,4,1,2,4 -lv 4` (fixtures/README.md).
    stdout = recorded("cpu/batched-bench.warmup-lv4.stdout")
    assert all(line.startswith("{") for line in stdout.splitlines() if line)  # -lv 4 writes its lines to stderr only
    rows = parse_batched_bench_jsonl(stdout)
    assert [row["batch_size"] for row in sweep.measured_rows(rows, [1, 2, 4], warmup=[1, 2, 4])] == [1, 2, 4]
    assert sweep.measured_rows(rows, [1, 2, 4], warmup=[1, 2, 4])[0] == rows[3]
    # A CPU build at -ngl 99 says nothing of offloading: on a device backend that stops the run.
    with pytest.raises(AgentError) as error:
        check_offload(recorded("cpu/batched-bench.warmup-lv4.stderr"), "CUDA0", "upstream")
    assert error.value.code == ExitCode.DEVICE


def test_it_calls_the_generation_check_inconclusive_where_the_baseline_loops_too() -> None:
    def entry(variant: str, prompt: str, degenerate: bool, identical: bool) -> dict[str, Any]:
        return {"variant": variant, "prompt_id": prompt, "degenerate": degenerate, "identical_to_baseline": identical}

    payload = _payload([])
    payload["generation"] = [
        entry("upstream", "ocean", True, True),
        entry("upstream", "code", False, True),
        entry("01", "ocean", True, True),
        entry("01", "code", True, False),
    ]
    lines = table(payload).replace("\n  ", " ").splitlines()  # the sentences as one line each, unwrapped
    assert any(line.startswith("upstream at") and "generation 1/2 degenerate, 2/2 identical" in line for line in lines)
    patched = next(line for line in lines if line.startswith("01 at"))
    assert "generation 1/1 degenerate, 1 not judged (the baseline is degenerate there too), 1/2 identical" in patched
