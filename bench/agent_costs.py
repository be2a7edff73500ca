"""The agent's own time as a share of a run (target 5): a real CPU run on Gemma 3 270M Q4_K_M from
`make fixtures`, llama.cpp from the pinned source tarball, run twice in the bench's own agent home (the
first run builds the variants there once, the second finds them cached).

What the run waited on is read from its logs: the agent ends each tool's `.cmd` and each cmake step in a
build log with the seconds it waited for that process (`tools.exit_line`); the agent's own time is the
rest of the wall time, Python's start included.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from benchhub_agent import tools

from bench.figures import report

FIXTURES = Path(os.environ.get("BENCHHUB_FIXTURES", Path.home() / ".cache" / "benchhub-fixtures"))
AGENT_HOME = FIXTURES / "bench-agent-home"  # not the e2e test's: the bench never changes what a test reads
MODEL = FIXTURES / "gemma-3-270m-q4_k_m.gguf"
TARBALL = FIXTURES / "llama.cpp-0c1e570.tar.gz"
FIRST_TOOL = "Correctness"  # the stage that runs test-backend-ops, the first llama.cpp tool


@dataclass(frozen=True)
class AgentRun:
    wall: float
    lines: list[tuple[float, str]]  # stderr lines, each with the seconds since the start
    run_dir: Path


def _waited(logs: Path, pattern: str) -> tuple[float, int]:
    """The seconds the agent waited on the processes whose logs match, and how many logs."""
    paths = list(logs.glob(pattern))
    return sum(tools.waited_seconds(path.read_text(errors="replace")) for path in paths), len(paths)


def _run_once(agent_home: Path, model: Path) -> AgentRun:
    agent = shutil.which("benchhub-agent", path=str(Path(sys.executable).parent))
    if agent is None or not model.exists() or not TARBALL.exists():
        raise RuntimeError(f"needs the installed benchhub-agent, {TARBALL} and {model} (make fixtures)")
    results = agent_home / "data" / "results"
    before = set(results.glob("*")) if results.exists() else set()
    args = [agent, "run", str(model), "--llama-src", str(TARBALL), "--backend", "cpu", "--batch-sizes", "1,2"]
    args += ["--reps", "1", "--max-reps", "1", "--gen-tokens", "32", "--no-upload", "--yes", "--json"]
    started = time.monotonic()
    lines: list[tuple[float, str]] = []
    process = subprocess.Popen(
        args,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "BENCHHUB_HOME": str(agent_home)},
    )

    def read() -> None:
        assert process.stderr is not None
        for line in process.stderr:
            lines.append((time.monotonic() - started, line.rstrip()))

    reader = threading.Thread(target=read)
    reader.start()
    process.wait()
    reader.join()
    wall = time.monotonic() - started
    if process.returncode:
        raise RuntimeError(f"agent exited {process.returncode}: {lines[-5:]}")
    (run_dir,) = set(results.glob("*")) - before
    return AgentRun(wall, lines, run_dir)


def _when(run: AgentRun, prefix: str) -> float:
    return next(seconds for seconds, text in run.lines if text.startswith(prefix))


def _own_time(run: AgentRun, index: int) -> list[str]:
    """The agent's own time: the wall time less the llama.cpp tools and cmake's build steps it waited on."""
    tool_seconds, count = _waited(run.run_dir / "logs", "*.cmd")
    builds, _ = _waited(run.run_dir / "logs", "build-*.log")
    own = run.wall - tool_seconds - builds
    built = f", cmake {builds:.1f} s" if builds else ""
    lines = [
        f"run {index}: wall {run.wall:.2f} s, {count} llama.cpp tool runs {tool_seconds:.2f} s{built}, "
        f"agent's own {own:.2f} s = {100 * own / run.wall:.2f}% of the run"
    ]
    first_tool = _when(run, FIRST_TOOL)
    lines.append(f"  until the first tool starts (model, campaign, source, build, machine): {first_tool:.2f} s")
    return lines


def run(times: int = 2) -> None:
    lines_out = [f"benchhub-agent run {MODEL.name} --backend cpu --batch-sizes 1,2 --reps 1, home {AGENT_HOME}"]
    for index in range(times):
        agent_run = _run_once(AGENT_HOME, MODEL)
        lines_out.extend(_own_time(agent_run, index + 1))
        stages = [f"{seconds:6.1f}s {text[:100]}" for seconds, text in agent_run.lines if text.strip()][:40]
        lines_out.extend(f"  {stage}" for stage in stages)
    report("agent costs (target 5)", lines_out)
