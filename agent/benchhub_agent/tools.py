"""Running the llama.cpp binaries, and pure parsers of what they print.

The parsers take text and return values; they are tested on real captured outputs
(tests/agent/fixtures/), including aborted runs and builds without the requested backend.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .errors import AgentError, ExitCode

ANSI_ESCAPE = re.compile(r"\x1b\[[0-9;]*m")
# How long a process the agent waited on took, written into its log when it ends (a tool's `.cmd`, a
# variant's build log): what the run spent waiting on llama.cpp and cmake, the rest is the agent's own.
_EXIT_LINE = re.compile(r"^# exit -?\d+ after ([\d.]+) s$", re.MULTILINE)


def exit_line(code: int, seconds: float) -> str:
    return f"# exit {code} after {seconds:.3f} s\n"


def waited_seconds(log_text: str) -> float:
    """The seconds of every process a log says the agent waited on (its `exit_line`s)."""
    return sum(float(seconds) for seconds in _EXIT_LINE.findall(log_text))


@dataclass(frozen=True)
class ToolRun:
    args: tuple[str, ...]
    exit_code: int  # shell convention: 128 + signal number when the tool was killed (abort = 134)
    stdout: str
    stderr: str
    seconds: float
    log_stem: Path


def run_tool(
    args: list[str],
    log_stem: Path,
    env: dict[str, str] | None = None,
    timeout: float | None = None,
    on_line: Callable[[str], None] | None = None,
) -> ToolRun:
    """Run one tool with its output kept next to the result (`<stem>.stdout/.stderr/.cmd`); the `.cmd`
    ends with the tool's `exit_line` once it is over.

    The child runs in its own session so that a Ctrl-C reaches the agent, which then ends the child
    itself and re-raises: no orphan keeps the GPU busy after the agent is gone."""
    log_stem.parent.mkdir(parents=True, exist_ok=True)
    full_env = {**os.environ, **(env or {})}
    env_prefix = " ".join(f"{key}={shlex.quote(value)}" for key, value in sorted((env or {}).items()))
    command_log = Path(f"{log_stem}.cmd")
    command_log.write_text(f"{env_prefix} {shlex.join(args)}".strip() + "\n")
    started = time.monotonic()
    try:
        with (
            open(f"{log_stem}.stdout", "wb") as out,
            open(f"{log_stem}.stderr", "wb") as err,
        ):
            stdout_target = subprocess.PIPE if on_line else out
            process = subprocess.Popen(args, stdout=stdout_target, stderr=err, env=full_env, start_new_session=True)
            try:
                if on_line and process.stdout is not None:
                    # Each line is kept and shown as it comes: a sweep of a large model reports every row.
                    for raw in process.stdout:
                        out.write(raw)
                        on_line(raw.decode(errors="replace"))
                code = process.wait(timeout=timeout)
            except BaseException:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
                raise
    except FileNotFoundError as error:
        raise AgentError(ExitCode.MISSING_TOOL, f"{args[0]} is not there: {error.strerror}.") from error
    except subprocess.TimeoutExpired:
        code = 128 + signal.SIGKILL
    seconds = time.monotonic() - started
    exit_code = 128 - code if code < 0 else code
    with command_log.open("a") as log:
        log.write(exit_line(exit_code, seconds))
    stdout = Path(f"{log_stem}.stdout").read_text(errors="replace")
    stderr = Path(f"{log_stem}.stderr").read_text(errors="replace")
    return ToolRun(tuple(args), exit_code, stdout, stderr, seconds, log_stem)


def parse_batched_bench_jsonl(stdout: str) -> list[dict[str, Any]]:
    """Rows of `llama-batched-bench --output-format jsonl`, in the order printed.

    Only lines that are JSON objects with a batch size count: an aborting run interleaves gdb's
    backtrace with the rows on stdout."""
    rows: list[dict[str, Any]] = []
    for line in stdout.splitlines():
        if not line.startswith("{"):
            continue
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if not isinstance(record, dict) or "pl" not in record:
            continue
        rows.append(
            {
                "batch_size": int(record["pl"]),
                "pp_tps": float(record["speed_pp"]),
                "tg_tps": float(record["speed_tg"]),
                "t_pp_s": float(record["t_pp"]),
                "t_tg_s": float(record["t_tg"]),
            }
        )
    return rows


@dataclass(frozen=True)
class Correctness:
    status: str  # "pass" | "fail" | "not_run"
    passed: int
    failed: int
    reason: str | None


# A case line ends in its outcome; a failing one starts with what failed ("[MUL_MAT] ERR = 0.1 > 0.0005 ",
# "sentinel mismatch: sent_3 "), printed on the same line before the case's name.
# Older builds put the error after the name instead ("...): NMSE = 2.678957 FAIL").
_CASE = re.compile(r"\b[A-Z][A-Z0-9_]*\(.*\): (?:.* )?(OK|FAIL)\s*$")
_SUMMARY = re.compile(r"^\s+(\d+)/(\d+) tests passed")
_BACKEND = re.compile(r"^Backend \d+/\d+: (\S+)")
_BACKEND_STATUS = re.compile(r"^\s+Backend (\S+): (OK|FAIL)")
# What Metal prints when its library does not compile. On M5-class GPUs the pinned commit also compiles
# a tensor-API probe that may fail this way and be disabled, after which every test still runs: the line
# only means something when the device never came up to be tested.
_KERNEL_DID_NOT_COMPILE = re.compile(
    r"error compiling source|failed to compile pipeline|failed to initialize the Metal"
)
_STDERR_REASONS = re.compile(
    r"error compiling source|failed to compile pipeline|error:|GGML_ASSERT|ggml_abort|Failed to initialize|"
    r"failed to allocate"
)


@dataclass
class _DeviceTally:
    tested: bool = False
    passed: int = 0
    failed: int = 0
    summary: tuple[int, int] | None = None  # (passed, run) as test-backend-ops counted them
    status: str | None = None


def case_outcome(line: str) -> str | None:
    """ "OK" or "FAIL" for a line that reports a test case, None for any other line."""
    case = _CASE.search(ANSI_ESCAPE.sub("", line))
    return case.group(1) if case else None


def _tally(stdout: str, device: str) -> _DeviceTally:
    tally = _DeviceTally()
    lines = ANSI_ESCAPE.sub("", stdout).splitlines()
    current: str | None = None
    last_summary: tuple[int, int] | None = None
    for index, line in enumerate(lines):
        backend = _BACKEND.match(line)
        if backend:
            current = backend.group(1)
            following = lines[index + 1].strip() if index + 1 < len(lines) else ""
            tally.tested = tally.tested or (current == device and not following.startswith("Skipping"))
            continue
        status = _BACKEND_STATUS.match(line)
        if status:
            if status.group(1) == device:  # it names its device: enough even where the header was cut off
                tally.tested, tally.status = True, status.group(2)
                tally.summary = tally.summary or last_summary
            current = None
            continue
        summary = _SUMMARY.match(line)
        if summary:
            last_summary = (int(summary.group(1)), int(summary.group(2)))
            if current == device:
                tally.summary = last_summary
            continue
        outcome = case_outcome(line)
        if outcome and current == device:
            if outcome == "OK":
                tally.passed += 1
            else:
                tally.failed += 1
    if tally.summary and tally.passed + tally.failed < tally.summary[1]:
        # Its own count covers the case lines that were lost (a log quoted or cut in the middle).
        tally.passed, tally.failed = tally.summary[0], tally.summary[1] - tally.summary[0]
    return tally


def parse_test_backend_ops(stdout: str, stderr: str, exit_code: int, device: str) -> Correctness:
    """Outcome of `test-backend-ops -o MUL_MAT -b <device>` for that device.

    `pass` needs the device to have been tested, at least one case to pass, none to fail and a clean
    exit. A device that was skipped or absent is `not_run` (test-backend-ops still prints OK then),
    unless stderr says why it never came up: a Metal library that does not compile (a patch's kernel)
    is `fail` with the message. A crash is `fail` too."""
    tally = _tally(stdout, device)
    crashed = exit_code != 0 and (tally.tested or exit_code > 128)
    did_not_compile = not tally.tested and bool(_KERNEL_DID_NOT_COMPILE.search(stderr))
    if not tally.tested and not crashed and not did_not_compile:
        return Correctness("not_run", 0, 0, f"test-backend-ops found no {device} device to test in this build")
    if tally.failed or crashed or did_not_compile or tally.status == "FAIL":
        reason = _failure_reason(stderr, exit_code, tally.failed)
        return Correctness("fail", tally.passed, tally.failed, reason)
    if tally.passed == 0:
        return Correctness("not_run", 0, 0, f"no MUL_MAT case is supported on {device}")
    return Correctness("pass", tally.passed, 0, None)


def _failure_reason(stderr: str, exit_code: int, failed: int) -> str:
    messages = [line.strip() for line in stderr.splitlines() if _STDERR_REASONS.search(line)]
    parts = [f"{failed} MUL_MAT case(s) failed"] if failed else []
    if exit_code != 0:
        parts.append(f"test-backend-ops exited with {exit_code}")
    parts.extend(dict.fromkeys(messages))  # keep order, drop repeats
    return "; ".join(parts)[:2000]


_SAMPLED = re.compile(r"samplers time =\s*[\d.]+ ms /\s*(\d+) tokens")
_PROMPT = re.compile(r"prompt eval time =\s*[\d.]+ ms /\s*(\d+) tokens")


def parse_completion_token_count(stderr: str) -> int | None:
    """Tokens generated by `llama-completion`: what the samplers saw minus the prompt."""
    sampled = _SAMPLED.search(stderr)
    prompt = _PROMPT.search(stderr)
    if not sampled or not prompt:
        return None
    return max(0, int(sampled.group(1)) - int(prompt.group(1)))


_VERSION = re.compile(r"version: (\S+) \(build \d+, commit (\w+)\)")
_BUILT_WITH = re.compile(r"built with (.+?) for (\S+)")


def parse_version(stderr: str) -> tuple[str | None, str | None]:
    """(short commit, compiler) from `llama-completion --version`, which prints to stderr."""
    version = _VERSION.search(stderr)
    built = _BUILT_WITH.search(stderr)
    return (version.group(2) if version else None, built.group(1) if built else None)


_OFFLOADED = re.compile(r"load_tensors: offloaded (\d+)/(\d+) layers to GPU")


def parse_offload(stderr: str) -> tuple[int, int] | None:
    """(layers offloaded, layers offloadable) from a tool's log at verbosity 4 or more; None when the
    log has no such line, which is what a build without a GPU backend prints (it never tries)."""
    found = _OFFLOADED.findall(ANSI_ESCAPE.sub("", stderr))
    return (int(found[-1][0]), int(found[-1][1])) if found else None


def check_offload(stderr: str, device: str, variant: str, n_gpu_layers: int = 99) -> None:
    """Stops a run whose model did not go to the device: `-ngl` falls back to the CPU without a word
    when the device backend is missing or does not come up, and CPU numbers must not be published as
    the device's."""
    offload = parse_offload(stderr)
    if offload is None:
        seen = "no GPU offload at all"
    elif offload[0] >= min(n_gpu_layers, offload[1]) > 0:
        return
    else:
        seen = f"{offload[0]}/{offload[1]} layers offloaded"
    raise AgentError(
        ExitCode.DEVICE,
        f"Variant {variant} ran on the CPU, not on {device} (its llama.cpp log shows {seen}): "
        "this build or machine cannot drive the device, so its numbers would be mislabelled.",
    )
