from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from benchhub_agent import tools
from benchhub_agent.errors import AgentError, ExitCode
from benchhub_agent.tools import (
    parse_batched_bench_jsonl,
    parse_completion_token_count,
    parse_test_backend_ops,
    parse_version,
    run_tool,
    waited_seconds,
)

Recorded = Callable[[str], str]


def test_it_parses_every_row_of_a_clean_batched_bench_run(recorded: Recorded) -> None:
    rows = parse_batched_bench_jsonl(recorded("cpu/batched-bench.jsonl.stdout"))
    assert [row["batch_size"] for row in rows] == [1, 2, 3, 4, 5, 8]
    expected = {"batch_size": 4, "pp_tps": 1552.804443, "tg_tps": 120.133881, "t_pp_s": 0.329726, "t_tg_s": 1.065478}
    assert rows[3] == expected


def test_it_keeps_the_rows_printed_before_an_abort_and_ignores_the_backtrace(recorded: Recorded) -> None:
    rows = parse_batched_bench_jsonl(recorded("cpu/batched-bench.ctx-too-small.stdout"))
    assert [row["batch_size"] for row in rows] == [1, 2]
    assert rows[1]["tg_tps"] == 89.015610


def test_it_parses_the_cuda_sweep(recorded: Recorded) -> None:
    rows = parse_batched_bench_jsonl(recorded("cuda-h200/bb-cuda-IQ2_XXS.jsonl"))
    assert [row["batch_size"] for row in rows] == [1, 2, 3, 4, 5, 8, 9, 12, 16]
    assert rows[0]["tg_tps"] == 510.725220


def test_it_passes_cuda_only_when_cuda0_was_tested_and_all_cases_passed(recorded: Recorded) -> None:
    result = parse_test_backend_ops(
        recorded("cuda-h200/tbo-cuda-mulmat.stdout"), recorded("cuda-h200/tbo-cuda-mulmat.stderr"), 0, "CUDA0"
    )
    assert (result.status, result.passed, result.failed) == ("pass", 122, 0)


def test_it_counts_the_cases_of_the_default_run_on_cuda0(recorded: Recorded) -> None:
    result = parse_test_backend_ops(recorded("cuda-h200/tbo-default.head-tail.stdout"), "", 0, "CUDA0")
    assert result.status == "pass"
    assert result.passed > 0


def test_it_reports_not_run_when_a_cpu_only_build_prints_ok_having_tested_nothing(recorded: Recorded) -> None:
    result = parse_test_backend_ops(recorded("cpu/test-backend-ops.cpu-only.stdout"), "", 0, "MTL0")
    assert result.status == "not_run"
    assert result.passed == 0
    assert result.reason and "MTL0" in result.reason


def test_it_reports_not_run_when_the_device_is_missing_from_a_real_multi_device_run(recorded: Recorded) -> None:
    result = parse_test_backend_ops(recorded("cuda-h200/tbo-cuda-mulmat.stdout"), "", 0, "MTL0")
    assert result.status == "not_run"


def test_it_counts_the_cpu_backend_against_itself(recorded: Recorded) -> None:
    result = parse_test_backend_ops(recorded("cpu/test-backend-ops.b-cpu.stdout.gz"), "", 0, "CPU")
    assert (result.status, result.passed, result.failed) == ("pass", 1330, 0)


def test_it_fails_on_a_failed_case_and_says_how_many(recorded: Recorded) -> None:
    stdout = recorded("cuda-h200/tbo-cuda-mulmat.stdout").replace(
        "m=16,n=3,k=256,bs=[1,1],nr=[1,1],per=[0,1,2,3],k_v=0,o=1,src_overlap=0,m_v=0,pad=0): \x1b[1;32mOK",
        "m=16,n=3,k=256,bs=[1,1],nr=[1,1],per=[0,1,2,3],k_v=0,o=1,src_overlap=0,m_v=0,pad=0): \x1b[1;31mFAIL",
        1,
    )
    result = parse_test_backend_ops(stdout, "", 1, "CUDA0")
    assert (result.status, result.passed, result.failed) == ("fail", 121, 1)
    assert result.reason and "1 MUL_MAT case(s) failed" in result.reason


def test_it_fails_with_the_compiler_message_when_a_metal_kernel_does_not_compile(recorded: Recorded) -> None:
    # Constructed from the format strings of ggml-metal-device.m at 0c1e570 (no Mac here to record one):
    # the library fails to compile, no MTL0 device comes up, test-backend-ops exits 0 having tested nothing.
    stderr = (
        "ggml_metal_library_init: error compiling source: Error Domain=MTLLibraryErrorDomain Code=3 "
        "\"program_source:6120:5: error: use of undeclared identifier 'dequantize_iq2_xxs_t4'\"\n"
    )
    result = parse_test_backend_ops(recorded("cpu/test-backend-ops.cpu-only.stdout"), stderr, 0, "MTL0")
    assert result.status == "fail"
    assert result.reason and "undeclared identifier 'dequantize_iq2_xxs_t4'" in result.reason


def test_it_fails_when_test_backend_ops_is_killed_mid_run(recorded: Recorded) -> None:
    stdout = "\n".join(recorded("cuda-h200/tbo-cuda-mulmat.stdout").splitlines()[:20])
    result = parse_test_backend_ops(stdout, "GGML_ASSERT(buf != NULL) failed\n", 134, "CUDA0")
    assert result.status == "fail"
    assert result.reason and "exited with 134" in result.reason and "GGML_ASSERT" in result.reason


def test_it_counts_generated_tokens_from_the_completion_log(recorded: Recorded) -> None:
    assert parse_completion_token_count(recorded("cpu/completion.gemma-270m-IQ2_XXS.stderr")) == 96
    assert parse_completion_token_count(recorded("cuda-h200/completion-random.stderr")) == 48
    assert parse_completion_token_count("no perf lines") is None


def test_it_reads_commit_and_compiler_from_the_version_banner(recorded: Recorded) -> None:
    assert parse_version(recorded("cpu/version.stderr")) == ("0c1e570", "GNU 12.2.0")


def test_it_runs_a_tool_keeping_its_logs_and_the_exit_code_of_an_abort(tmp_path: Path) -> None:
    script = "import os, sys; print('row'); sys.stderr.write('boom'); sys.stdout.flush(); os.abort()"
    run = run_tool([sys.executable, "-c", script], tmp_path / "logs" / "abort", env={"X_TEST": "1"})
    assert run.exit_code == 134
    assert run.stdout == "row\n"
    assert (tmp_path / "logs" / "abort.stderr").read_text() == "boom"
    command_log = (tmp_path / "logs" / "abort.cmd").read_text()
    assert "X_TEST=1" in command_log
    # The log says how long the agent waited on the tool, the figure its own time is measured against.
    assert command_log.splitlines()[-1] == f"# exit 134 after {run.seconds:.3f} s"
    assert waited_seconds(command_log) == pytest.approx(run.seconds, abs=0.001)
    assert 0 < run.seconds < 60


def test_it_adds_up_the_waits_a_log_records() -> None:
    log = "$ cmake -S a -B b\n# exit 0 after 2.5 s\n[ 50%] Building\n# exit -9 after 0.250 s\n# exit 0 after x s\n"
    assert waited_seconds(log) == 2.75
    assert waited_seconds("no exit lines") == 0


def test_it_names_a_missing_binary(tmp_path: Path) -> None:
    with pytest.raises(AgentError) as caught:
        run_tool([str(tmp_path / "nope")], tmp_path / "x")
    assert caught.value.code == ExitCode.MISSING_TOOL


METAL = Path(__file__).parent / "fixtures" / "metal"


def test_it_counts_failing_cases_whatever_is_printed_before_or_after_their_name() -> None:
    # Real lines (fixtures/metal/SOURCE.md): the error before the name, and after it (2023, Metal).
    prefixed = (METAL / "tbo-musa-prefixed-fail.lines").read_text().splitlines()
    suffixed = (METAL / "tbo-metal-2023-nmse.lines").read_text().splitlines()
    assert [tools.case_outcome(line) for line in prefixed] == ["FAIL", "FAIL"]
    assert [tools.case_outcome(line) for line in suffixed] == ["OK", "FAIL", "FAIL"]
    # The pinned commit's own failure lines, built from its format strings (test-backend-ops.cpp at 0c1e570).
    name = "MUL_MAT(type_a=iq2_xxs,type_b=f32,m=16,n=3,k=256,bs=[1,1],nr=[1,1],per=[0,1,2,3],k_v=0,o=1)"
    assert tools.case_outcome(f"[MUL_MAT] ERR = 0.012345678 > 0.000500000   {name}: \x1b[1;31mFAIL\x1b[0m") == "FAIL"
    assert tools.case_outcome(f"sentinel mismatch: sent_3   {name}: \x1b[1;31mFAIL\x1b[0m") == "FAIL"
    assert tools.case_outcome(f"  {name}: not supported [MTL0] ") is None
    assert tools.case_outcome(f"  {name}") is None  # a name in the "Failing tests:" list


def test_it_counts_failures_in_a_real_run_with_an_err_line(recorded: Recorded) -> None:
    stdout = recorded("cuda-h200/tbo-cuda-mulmat.stdout").splitlines()
    index = next(i for i, line in enumerate(stdout) if tools.case_outcome(line) == "OK")
    stdout[index] = "[MUL_MAT] ERR = 0.012345678 > 0.000500000 " + stdout[index].replace("OK", "FAIL")
    result = parse_test_backend_ops("\n".join(stdout), "", 0, "CUDA0")
    assert (result.status, result.failed) == ("fail", 1)


def test_it_fails_the_m5_max_run_that_reported_one_failing_case() -> None:
    stdout = (METAL / "tbo-m5max-one-fail.tail.stdout").read_text()
    result = parse_test_backend_ops(stdout, "", 1, "MTL0")
    assert (result.status, result.passed, result.failed) == ("fail", 1155, 1)


def test_it_passes_a_run_whose_stderr_has_the_m5_tensor_probe_compile_error(recorded: Recorded) -> None:
    # The M5 Max probe's stderr (real) beside a real run in which every case passed (CUDA0 here: no full
    # passing Metal log was found posted): the probe's failure is no failure of the tests.
    probe = (METAL / "m5max-tensor-probe.stderr").read_text()
    result = parse_test_backend_ops(recorded("cuda-h200/tbo-cuda-mulmat.stdout"), probe, 0, "CUDA0")
    assert (result.status, result.passed, result.failed) == ("pass", 122, 0)
    # Where the device never came up, the same line is the reason it did not: a failure.
    untested = parse_test_backend_ops(recorded("cpu/test-backend-ops.cpu-only.stdout"), probe, 0, "MTL0")
    assert untested.status == "fail" and "error compiling source" in (untested.reason or "")


def test_it_reads_how_many_layers_went_to_the_device(recorded: Recorded) -> None:
    assert tools.parse_offload((METAL / "offload-m2pro-all.stderr").read_text()) == (66, 66)
    assert tools.parse_offload((METAL / "offload-none.stderr").read_text()) == (0, 33)
    # The pinned commit at its default verbosity prints no load_tensors line at all, even on CUDA.
    assert tools.parse_offload(recorded("cuda-h200/completion-random.stderr")) is None


def test_it_stops_a_device_run_unless_every_layer_was_offloaded(recorded: Recorded) -> None:
    tools.check_offload((METAL / "offload-m2pro-all.stderr").read_text(), "MTL0", "01")
    for stderr in ((METAL / "offload-none.stderr").read_text(), recorded("cuda-h200/completion-random.stderr")):
        with pytest.raises(AgentError) as error:
            tools.check_offload(stderr, "MTL0", "01")
        assert error.value.code == ExitCode.DEVICE and error.value.message.startswith("Variant 01 ran on the CPU")
