"""Issue 6 target 6: the agent's own time on a real CPU run (Gemma 3 270M IQ2_XXS from the e2e
fixtures), run twice with the same inputs. Tool time is read from the run's tool logs: a tool's
`.cmd` is written just before it starts and its `.stdout`/`.stderr` last change when it ends."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

from bench.figures import report

FIXTURES = Path(os.environ.get("BENCHHUB_FIXTURES", Path.home() / ".cache" / "benchhub-fixtures"))
AGENT_HOME = FIXTURES / "agent-home"
MODEL = FIXTURES / "gemma-3-270m-IQ2_XXS.gguf"
TARBALL = FIXTURES / "llama.cpp-0c1e570.tar.gz"


def _tool_seconds(logs: Path) -> tuple[float, int]:
    total, count = 0.0, 0
    for command in logs.glob("*.cmd"):
        outputs = [command.with_suffix(suffix) for suffix in (".stdout", ".stderr")]
        ended = max((path.stat().st_mtime for path in outputs if path.exists()), default=command.stat().st_mtime)
        total += ended - command.stat().st_mtime
        count += 1
    return total, count


def _run_once() -> tuple[float, float, list[tuple[float, str]], Path]:
    agent = shutil.which("benchhub-agent", path=str(Path(sys.executable).parent))
    if agent is None or not MODEL.exists():
        raise RuntimeError("needs the installed benchhub-agent and the e2e fixtures (make fixtures, tests/e2e)")
    results = AGENT_HOME / "data" / "results"
    before = set(results.glob("*")) if results.exists() else set()
    args = [agent, "run", str(MODEL), "--llama-src", str(TARBALL), "--backend", "cpu", "--batch-sizes", "1,2"]
    args += ["--reps", "1", "--max-reps", "1", "--gen-tokens", "32", "--no-upload", "--yes", "--json"]
    started_at = time.time()
    started = time.monotonic()
    lines: list[tuple[float, str]] = []
    process = subprocess.Popen(
        args,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "BENCHHUB_HOME": str(AGENT_HOME)},
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
    return started_at, wall, lines, run_dir


def run(times: int = 2) -> None:
    lines_out = [f"benchhub-agent run {MODEL.name} --backend cpu --batch-sizes 1,2 --reps 1, home {AGENT_HOME}"]
    for index in range(times):
        started_at, wall, lines, run_dir = _run_once()
        tools, count = _tool_seconds(run_dir / "logs")
        first_tool = min((path.stat().st_mtime for path in (run_dir / "logs").glob("*.cmd")), default=None)
        lines_out.append(
            f"run {index + 1}: wall {wall:.1f} s, {count} llama.cpp tool runs {tools:.1f} s, "
            f"agent's own {wall - tools:.1f} s = {100 * (wall - tools) / wall:.1f}% of the run"
        )
        if first_tool is not None:
            lines_out.append(
                f"  until the first tool starts (machine, model, source, build): {first_tool - started_at:.1f} s"
            )
        stages = [f"{seconds:6.1f}s {text[:100]}" for seconds, text in lines if text.strip()][:40]
        lines_out.extend(f"  {stage}" for stage in stages)
    report("agent costs (issue 6 target 6)", lines_out)
