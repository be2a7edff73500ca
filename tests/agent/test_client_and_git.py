from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from benchhub_agent import client, source
from benchhub_agent.dirs import home
from benchhub_agent.errors import AgentError, ExitCode


def git(*args: str, cwd: Path) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


def test_it_fetches_exactly_one_commit_and_reuses_it(tmp_path: Path) -> None:
    upstream = tmp_path / "upstream"
    upstream.mkdir()
    git("init", "-q", cwd=upstream)
    git("config", "uploadpack.allowAnySHA1InWant", "true", cwd=upstream)
    (upstream / "CMakeLists.txt").write_text("project(first)\n")
    git("add", ".", cwd=upstream)
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "first", cwd=upstream)
    pinned = git("rev-parse", "HEAD", cwd=upstream)
    (upstream / "CMakeLists.txt").write_text("project(second)\n")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qam", "second", cwd=upstream)

    tree = source.from_git(f"file://{upstream}", pinned, home())
    assert (tree / "CMakeLists.txt").read_text() == "project(first)\n"
    store = home().sources / "git-objects"
    assert git("rev-list", "--count", f"refs/benchhub/{pinned}", cwd=store) == "1"  # the commit, no history
    assert source.from_git(f"file://{upstream}", pinned, home()) == tree


def test_it_names_the_commit_it_could_not_fetch(tmp_path: Path) -> None:
    with pytest.raises(AgentError) as caught:
        source.from_git(f"file://{tmp_path}/absent", "a" * 40, home())
    assert caught.value.code == ExitCode.SOURCE and "aaaaaaaaaaaa" in caught.value.message
    assert not list(home().sources.glob(f"git-{'a' * 40}*"))  # no tree, not even a partial one


def test_it_retries_with_growing_delays_then_gives_up_with_the_reason() -> None:
    waits: list[float] = []
    with pytest.raises(AgentError) as caught:
        client.post_envelope("http://127.0.0.1:9", "/api/v1/submissions/", b"{}", attempts=3, sleep=waits.append)
    assert waits == [1.0, 2.0]
    assert caught.value.code == ExitCode.UPLOAD and "after 3 attempts" in caught.value.message
