"""`benchhub-agent run` against a hostile server, end to end: a real loopback HTTP server (the HTTP seam)
serves the bundled campaign with one field crafted as in issue 24. Each attack is refused with one
sentence and its exit code, and nothing appears outside the temporary agent home: no marker file a
command would have touched, no file a path would have written, no source fetched, nothing built.

Against the agent before issue 24 these attacks worked: the markers were created (the commands ran, the
files were written), and the run went on to build.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from benchhub_agent.cli import main
from benchhub_agent.errors import ExitCode
from click.testing import CliRunner, Result

from tests.agent.loopback import HostileServer, running

FIXTURES = Path(os.environ.get("BENCHHUB_FIXTURES", Path.home() / ".cache/benchhub-fixtures"))
GEMMA = FIXTURES / "gemma-3-270m-q4_k_m.gguf"  # a real model: the old agent read it before the manifest


@pytest.fixture
def hostile() -> Iterator[HostileServer]:
    """Every manifest it serves signed by the campaign key (as if stolen): these tests are about the
    agent's field checks, which hold past the signature (tests/agent/test_signed_manifests.py is
    about the signature)."""
    with running() as server:
        server.stolen_key = True
        yield server


@pytest.fixture
def workspace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A working directory, and a tiny CMake project as --llama-src: the old agent built it at once."""
    (tmp_path / "cwd").mkdir()
    monkeypatch.chdir(tmp_path / "cwd")
    tiny = tmp_path / "tiny-src"
    tiny.mkdir()
    (tiny / "CMakeLists.txt").write_text("cmake_minimum_required(VERSION 3.14)\nproject(tiny NONE)\n")
    if not GEMMA.is_file():
        pytest.fail(f"{GEMMA} is missing: run `make fixtures` (scripts/fixtures.sh).")
    return tmp_path


def everything_outside(root: Path, home: Path) -> list[str]:
    return sorted(str(path.relative_to(root)) for path in root.rglob("*") if home not in (path, *path.parents))


def run_agent(server: HostileServer, root: Path, *extra: str, from_git: bool = False) -> Result:
    """`from_git`: llama.cpp from the manifest's repo (where git commands are attacked), else the tiny
    project (where the old agent reached the build, and the writes of its logs, in a second)."""
    args = ["run", str(GEMMA), "--server", server.url, "--no-upload", "--backend", "cpu", *extra]
    return CliRunner().invoke(main, args if from_git else [*args, "--llama-src", str(root / "tiny-src")])


def assert_refused(answer: Result, code: ExitCode, *words: str) -> None:
    assert answer.exit_code == code, answer.output
    message = answer.output.strip().splitlines()[-1]
    assert message.startswith("benchhub-agent: ") and message.endswith(".")
    assert message.count(". ") == 0, message  # one sentence
    for word in words:
        assert word in message, message


def assert_nothing_written(root: Path, home: Path, before: list[str], *markers: Path) -> None:
    for marker in markers:
        assert not marker.exists(), f"{marker} was written"
    assert everything_outside(root, home) == before
    assert not (home / "cache" / "build").exists() and not (home / "cache" / "src").exists()
    assert not (home / "data" / "results").exists()


def test_it_refuses_a_commit_that_is_a_git_option_and_a_repo_that_is_a_path(
    hostile: HostileServer, workspace: Path, isolated_home: Path
) -> None:
    marker = workspace / "pwned-by-fetch"
    hostile.manifest["repo"] = "/"
    hostile.manifest["variants"][0]["commit"] = f"--upload-pack=touch {marker};:"
    before = everything_outside(workspace, isolated_home)
    answer = run_agent(hostile, workspace, from_git=True)
    assert_refused(answer, ExitCode.MANIFEST, "repo", "https://")
    assert_nothing_written(workspace, isolated_home, before, marker)


def test_it_refuses_a_commit_that_is_a_git_option_even_with_an_https_repo(
    hostile: HostileServer, workspace: Path, isolated_home: Path
) -> None:
    marker = workspace / "pwned-by-fetch"
    hostile.manifest["variants"][0]["commit"] = f"--upload-pack=touch {marker};:"
    before = everything_outside(workspace, isolated_home)
    answer = run_agent(hostile, workspace, from_git=True)
    assert_refused(answer, ExitCode.MANIFEST, "variants[0].commit", "40 lowercase hex")
    assert_nothing_written(workspace, isolated_home, before, marker)


def test_it_refuses_a_repo_that_is_a_git_option_when_a_variant_follows_a_ref(
    hostile: HostileServer, workspace: Path, isolated_home: Path
) -> None:
    marker = workspace / "pwned-by-ls-remote"
    hostile.manifest["repo"] = f"--upload-pack=touch {marker};:"
    hostile.manifest["variants"][1].update(commit=None, ref="refs/pull/1/head")
    before = everything_outside(workspace, isolated_home)
    answer = run_agent(hostile, workspace, from_git=True)
    assert_refused(answer, ExitCode.MANIFEST, "repo")
    assert_nothing_written(workspace, isolated_home, before, marker)


@pytest.mark.parametrize("where", ["absolute", "climbing"])
def test_it_refuses_a_patch_name_that_leaves_the_cache(
    where: str, hostile: HostileServer, workspace: Path, isolated_home: Path
) -> None:
    marker = workspace / "pwned.patch"
    name = str(marker) if where == "absolute" else "../../../../pwned.patch"  # cache/patches/<sha>/ is 4 deep
    hostile.add_patch(1, name, b"diff --git a/x b/x\n", url=hostile.patch_url("evil"))
    hostile.files["evil"] = b"diff --git a/x b/x\n"
    before = everything_outside(workspace, isolated_home)
    answer = run_agent(hostile, workspace)
    assert_refused(answer, ExitCode.MANIFEST, "variants[1].patches[1].name", "plain file name")
    assert_nothing_written(workspace, isolated_home, before, marker)


def test_it_refuses_a_variant_name_that_climbs_out_of_the_results(
    hostile: HostileServer, workspace: Path, isolated_home: Path
) -> None:
    # Its build log, logs/build-<name>.log, would climb from logs/build-.. past the home to the workspace.
    marker = workspace / "pwned.log"
    hostile.manifest["variants"][0]["name"] = hostile.manifest["baseline"] = "../../../../../../../pwned"
    before = everything_outside(workspace, isolated_home)
    answer = run_agent(hostile, workspace)
    assert_refused(answer, ExitCode.MANIFEST, "variants[0].name", "plain name")
    assert_nothing_written(workspace, isolated_home, before, marker)


@pytest.mark.parametrize("variable", ["DYLD_INSERT_LIBRARIES", "LD_PRELOAD", "PATH", "GGML_X\nLD_PRELOAD"])
def test_it_passes_on_no_environment_variable_outside_the_allow_list(
    variable: str, hostile: HostileServer, workspace: Path, isolated_home: Path
) -> None:
    hostile.manifest["variants"][2]["env"][variable] = str(workspace / "evil.so")
    before = everything_outside(workspace, isolated_home)
    answer = run_agent(hostile, workspace)
    assert_refused(answer, ExitCode.MANIFEST, "variants[2].env key", "not one of the ggml switches")
    assert_nothing_written(workspace, isolated_home, before)


def test_it_refuses_an_allowed_variable_whose_value_spans_lines(
    hostile: HostileServer, workspace: Path, isolated_home: Path
) -> None:
    hostile.manifest["variants"][2]["env"]["GGML_METAL_MV_IQ2_XXS_VEC"] = "1\nLD_PRELOAD=/x.so"
    before = everything_outside(workspace, isolated_home)
    answer = run_agent(hostile, workspace)
    assert_refused(answer, ExitCode.MANIFEST, "variants[2].env.GGML_METAL_MV_IQ2_XXS_VEC")
    assert_nothing_written(workspace, isolated_home, before)


@pytest.mark.parametrize(
    ("key", "value", "field"),
    [
        ("reps", 1_000_000, "sweep.reps"),
        ("npp", 10_000_000, "sweep.npp"),
        ("ntg", 10_000_000, "sweep.ntg"),
        ("batch_sizes", list(range(1, 10_001)), "sweep.batch_sizes"),
        ("batch_sizes", [1, 2, 1_000_000], "sweep.batch_sizes[2]"),
        ("n_ctx", 2**40, "sweep.n_ctx"),
        ("extra_args", ["-pps", "--lora", "/tmp/x"], "sweep.extra_args"),
    ],
)
def test_it_refuses_an_unbounded_sweep(
    key: str, value: Any, field: str, hostile: HostileServer, workspace: Path, isolated_home: Path
) -> None:
    hostile.manifest["sweep"][key] = value
    before = everything_outside(workspace, isolated_home)
    answer = run_agent(hostile, workspace)
    assert_refused(answer, ExitCode.MANIFEST, field)
    assert_nothing_written(workspace, isolated_home, before)


def test_it_cuts_a_50_mb_patch_at_the_cap_while_it_streams(
    hostile: HostileServer, workspace: Path, isolated_home: Path
) -> None:
    hostile.manifest["variants"][1]["patches"].append(
        {"name": "big.patch", "sha256": "0" * 64, "url": f"{hostile.url}/big.patch"}
    )
    hostile.sign()  # past the signature (a stolen campaign key): the download's own cap still holds
    before = everything_outside(workspace, isolated_home)
    answer = run_agent(hostile, workspace)
    assert_refused(answer, ExitCode.MANIFEST, "big.patch", "larger than the 4 MB")
    # The agent stopped reading at 4 MB; what else left the server sat in socket buffers.
    assert hostile.big_bytes_sent < 16 * 1024 * 1024
    assert_nothing_written(workspace, isolated_home, before)
    assert not list((isolated_home / "cache").rglob("big.patch"))


def test_it_refuses_a_patch_url_that_is_plain_http_to_another_machine(
    hostile: HostileServer, workspace: Path, isolated_home: Path
) -> None:
    hostile.manifest["variants"][1]["patches"][0]["url"] = "http://patches.example.com/01.patch"
    before = everything_outside(workspace, isolated_home)
    answer = run_agent(hostile, workspace)
    assert_refused(answer, ExitCode.MANIFEST, "variants[1].patches[0].url", "plain http")
    assert_nothing_written(workspace, isolated_home, before)


def test_it_talks_plain_http_to_this_machine_only(workspace: Path, isolated_home: Path) -> None:
    answer = CliRunner().invoke(main, ["run", str(GEMMA), "--server", "http://benchhub.example.com"])
    assert_refused(answer, ExitCode.USAGE, "plain http")
    answer = CliRunner().invoke(main, ["upload", "--server", "http://10.0.0.1:8000"])
    assert_refused(answer, ExitCode.USAGE, "plain http")
