"""Crafted source tarballs, and caches that must not lie (issue 31).

Tarballs are unpacked by the agent's own rules whatever the Python version: the chain of long symlinks
that gets past `tarfile`'s data filter on Python releases before its fix (CVE-2025-4517) wrote a file
outside its folder through the agent before issue 31. The build cache is keyed by the tree actually
compiled, so a --llama-src tree is never reused as the pinned commit, and the result says "local". The
model's hash is recomputed when another file of the same size and mtime takes its place.
"""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import tarfile
from pathlib import Path

import pytest
from benchhub_agent import campaign, model, pipeline, source
from benchhub_agent.dirs import home
from benchhub_agent.errors import AgentError, ExitCode
from benchhub_agent.progress import Progress


def tarball(path: Path, members: list[tuple[tarfile.TarInfo, bytes | None]], mode: str = "w:gz") -> Path:
    with tarfile.open(path, mode) as archive:  # type: ignore[call-overload]
        for info, data in members:
            if data is not None:
                info.size = len(data)
            archive.addfile(info, io.BytesIO(data) if data is not None else None)
    return path


def member(
    name: str, kind: bytes = tarfile.REGTYPE, link: str = "", data: bytes | None = None
) -> tuple[tarfile.TarInfo, bytes | None]:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.linkname = link
    info.mode = 0o755 if kind == tarfile.DIRTYPE else 0o644
    return info, data if kind == tarfile.REGTYPE else None


def path_max_chain(folder_length: int, escape_to: str) -> list[tuple[tarfile.TarInfo, bytes | None]]:
    """Links whose resolved path passes PATH_MAX, which os.path.realpath then stops resolving: a filter
    that trusts realpath sees `escape` inside the folder while it leads to `escape_to` (CVE-2025-4517)."""
    steps = "abcdefghijklmnop"
    long_name = "d" * ((4096 - folder_length - 1) // (len(steps) + 1))
    members = []
    path = ""
    for step in steps:
        members.append(member(os.path.join(path, long_name), tarfile.DIRTYPE))
        members.append(member(os.path.join(path, step), tarfile.SYMTYPE, long_name))
        path = os.path.join(path, long_name)
    top = os.path.join(*steps, "l" * 254)
    members.append(member(top, tarfile.SYMTYPE, "../" * len(steps)))
    members.append(member("escape", tarfile.SYMTYPE, f"{top}/../{escape_to}"))
    members.append(member("escape/pwned", data=b"written outside\n"))
    return members


def unpack_folder_length() -> int:
    return len(str(home().sources / ("tarball-" + "0" * 24 + ".partial")))


CMAKE = member("llama.cpp/CMakeLists.txt", data=b"project(x)\n")


@pytest.mark.parametrize(
    "case",
    [
        "climbing name",
        "absolute name",
        "absolute symlink",
        "symlink out then through",
        "hard link out",
        "device",
        "fifo",
        "path max chain",
    ],
)
def test_a_crafted_tarball_writes_nothing_outside_its_folder(case: str, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    escape_to = os.path.relpath(outside, home().sources)
    members = {
        "climbing name": [CMAKE, member("../../../outside/pwned", data=b"x")],
        "absolute name": [CMAKE, member(f"{outside}/pwned", data=b"x")],
        "absolute symlink": [CMAKE, member("llama.cpp/out", tarfile.SYMTYPE, str(outside))],
        "symlink out then through": [
            CMAKE,
            member("llama.cpp/out", tarfile.SYMTYPE, f"../../{escape_to}"),
            member("llama.cpp/out/pwned", data=b"x"),
        ],
        "hard link out": [CMAKE, member("llama.cpp/hard", tarfile.LNKTYPE, str(outside / "pwned"))],
        "device": [CMAKE, member("llama.cpp/null", tarfile.CHRTYPE)],
        "fifo": [CMAKE, member("llama.cpp/pipe", tarfile.FIFOTYPE)],
        "path max chain": [CMAKE, *path_max_chain(unpack_folder_length(), escape_to)],
    }[case]
    refusal = None
    try:
        source.from_user(tarball(tmp_path / "src.tar.gz", members), home())
    except AgentError as error:
        refusal = error
    assert list(outside.iterdir()) == []
    assert refusal is not None and refusal.code == ExitCode.SOURCE
    assert not list(home().sources.glob("tarball-*"))  # no folder, not even a partial one


def test_a_tarball_with_links_inside_its_folder_unpacks(tmp_path: Path) -> None:
    members = [
        CMAKE,
        member("llama.cpp/ggml/a.c", data=b"int a;\n"),
        member("llama.cpp/link.c", tarfile.SYMTYPE, "ggml/a.c"),
        member("llama.cpp/tool.sh", data=b"#!/bin/sh\n"),
    ]
    members[-1][0].mode = 0o755
    root = source.from_user(tarball(tmp_path / "src.tar.gz", members), home())
    assert (root / "link.c").read_text() == "int a;\n" and os.readlink(root / "link.c") == "ggml/a.c"
    assert os.access(root / "tool.sh", os.X_OK) and not os.access(root / "ggml" / "a.c", os.X_OK)


def test_another_tarball_at_the_same_path_size_and_mtime_is_unpacked_again(tmp_path: Path) -> None:
    path = tmp_path / "src.tar.gz"
    # Uncompressed (tarfile reads either), so both archives have exactly the same size.
    first = source.from_user(tarball(path, [member("x/CMakeLists.txt", data=b"project(one)\n")], "w"), home())
    stamp = path.stat()
    tarball(path, [member("x/CMakeLists.txt", data=b"project(two)\n")], "w")
    os.utime(path, ns=(stamp.st_atime_ns, stamp.st_mtime_ns))
    assert path.stat().st_size == stamp.st_size
    second = source.from_user(path, home())
    assert (second / "CMakeLists.txt").read_text() == "project(two)\n" and second != first


TOOLS_CMAKE = """cmake_minimum_required(VERSION 3.14)
project(stand_in C)
set(CMAKE_RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/bin)
foreach(tool llama-batched-bench test-backend-ops llama-completion)
  add_executable(${tool} main.c)
endforeach()
"""


def git(*args: str, cwd: Path) -> str:
    command = ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args]
    return subprocess.run(command, cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


def test_a_local_tree_is_never_reused_as_the_pinned_commit_and_says_local(tmp_path: Path) -> None:
    """Real git and cmake on stand-in tools: the pinned commit, then a checkout of it with a local edit."""
    upstream = tmp_path / "llama.cpp"
    upstream.mkdir()
    (upstream / "CMakeLists.txt").write_text(TOOLS_CMAKE)
    (upstream / "main.c").write_text("int main(void) { return 0; }\n")
    git("init", "-q", cwd=upstream)
    git("add", ".", cwd=upstream)
    git("commit", "-qm", "pinned", cwd=upstream)
    commit = git("rev-parse", "HEAD", cwd=upstream)
    edited = tmp_path / "edited"
    shutil.copytree(upstream, edited, ignore=shutil.ignore_patterns(".git"))
    (edited / "main.c").write_text("int main(void) { return 1; }\n")

    variant = campaign.Variant("base", commit, ())
    plan = campaign.Campaign("c", f"file://{upstream}", "base", (variant,), {}, "server")

    def built(llama_src: Path | None) -> tuple[bool, str]:
        options = pipeline.RunOptions(
            model_path=tmp_path / "m.gguf", server=None, campaign_slug="c", llama_src=llama_src
        )
        logs = tmp_path / "logs"
        _, facts = pipeline._binaries([variant], plan, options, "cpu", home(), logs, Progress(live=False))
        cached = not (logs / "build-base.log").exists()  # a build writes its log; a cache hit writes none
        shutil.rmtree(logs, ignore_errors=True)
        return cached, facts["source"]

    assert built(None) == (False, "pinned")
    assert built(edited) == (False, "local")  # another tree: compiled, never the pinned commit's binaries
    assert built(None) == (True, "pinned")  # the pinned tree again: its own cached binaries


def test_the_model_hash_is_recomputed_when_another_file_takes_the_name(tmp_path: Path) -> None:
    path = tmp_path / "model.gguf"
    path.write_bytes(b"A" * 4096)
    first = model.sha256_cached(path, home())
    stamp = path.stat()
    path.write_bytes(b"B" * 4096)  # `cp -p` onto it: same inode and size, the mtime set back
    os.utime(path, ns=(stamp.st_atime_ns, stamp.st_mtime_ns))
    assert model.sha256_cached(path, home()) != first
    replacement = tmp_path / "incoming"
    replacement.write_bytes(b"A" * 4096)  # `rsync -a`: a new file renamed over it, the mtime set back
    os.utime(replacement, ns=(stamp.st_atime_ns, stamp.st_mtime_ns))
    replacement.replace(path)
    assert model.sha256_cached(path, home()) == first
