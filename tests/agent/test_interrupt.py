from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from benchhub_agent.errors import ExitCode

GEMMA = Path(os.environ.get("BENCHHUB_FIXTURES", Path.home() / ".cache/benchhub-fixtures")) / "gemma-3-270m-q4_k_m.gguf"


def stand_in_tools(folder: Path, pid_file: Path) -> Path:
    """Binaries that behave like slow llama.cpp tools: the sweep's tool records its pid and waits."""
    folder.mkdir()
    scripts = {
        "llama-batched-bench": f"#!/bin/sh\necho $$ > '{pid_file}'\nexec sleep 120\n",
        "test-backend-ops": "#!/bin/sh\nexit 0\n",
        "llama-completion": "#!/bin/sh\necho 'version: 1 (build 1, commit 0c1e570)' >&2\n"
        "echo 'built with GNU 12.2.0 for Linux x86_64' >&2\n",
    }
    for name, text in scripts.items():
        (folder / name).write_text(text)
        (folder / name).chmod(0o755)
    return folder


def default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_it_exits_130_on_ctrl_c_ending_its_tool_and_leaving_nothing_half_written(
    tmp_path: Path, isolated_home: Path
) -> None:
    if not GEMMA.is_file():  # a skip would read as a pass: `make test` fetches the model first
        pytest.fail(f"{GEMMA} is missing: run `make fixtures` (scripts/fixtures.sh).")
    pid_file = tmp_path / "tool.pid"
    tools = stand_in_tools(tmp_path / "bin", pid_file)
    agent = shutil.which("benchhub-agent", path=str(Path(sys.executable).parent))
    assert agent
    process = subprocess.Popen(
        [
            agent,
            "run",
            str(GEMMA),
            "--variant",
            f"upstream={tools}",
            "--backend",
            "cpu",
            "--no-upload",
            "--batch-sizes",
            "1",
            "--reps",
            "1",
        ],
        env={**os.environ, "BENCHHUB_HOME": str(isolated_home)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        # A suite started in the background (`nohup`, `&`) ignores SIGINT, and a child inherits that:
        # the agent must start with the default handling a terminal's Ctrl-C meets.
        preexec_fn=default_sigint,
    )
    deadline = time.monotonic() + 120
    while not pid_file.exists() or not pid_file.read_text().strip():
        assert process.poll() is None, process.stderr.read() if process.stderr else ""
        assert time.monotonic() < deadline, "the sweep never started"
        time.sleep(0.2)
    tool_pid = int(pid_file.read_text())
    process.send_signal(signal.SIGINT)
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == ExitCode.INTERRUPTED, stderr
    assert "interrupted" in stderr and "Traceback" not in stderr
    time.sleep(0.2)
    assert not alive(tool_pid), "the benchmark tool outlived the agent"
    leftovers = [path for path in isolated_home.rglob("*") if path.name.endswith((".tmp", ".partial"))]
    assert leftovers == []
    assert not list((isolated_home / "data" / "outbox").glob("*"))
