"""llama.cpp source at a pinned commit, and a working tree that takes a variant's patches and gives
them back, so that variants share one build directory and a later variant recompiles only what its
patches touch.

The pristine tree (a git checkout of one commit, a user's directory or an extracted tarball) is never
written to. The working tree is a copy; before each variant the files the previous variant touched
are restored from the pristine tree with a fresh mtime, so make sees them as changed.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import tarfile
from collections.abc import Sequence
from pathlib import Path

from .campaign import Patch
from .dirs import Dirs, write_atomic
from .errors import AgentError, ExitCode

APPLIED_RECORD = ".benchhub-applied.json"


def _git(args: Sequence[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    # A ceiling stops git from finding an enclosing repository (BENCHHUB_HOME may sit inside one):
    # `git apply` run under another repo resolves paths against that repo and silently skips patches.
    env = {**os.environ, "GIT_CEILING_DIRECTORIES": str(cwd.parent), "GIT_TERMINAL_PROMPT": "0"}
    try:
        return subprocess.run(["git", *args], cwd=cwd, env=env, capture_output=True, text=True)
    except FileNotFoundError as error:
        raise AgentError(ExitCode.MISSING_TOOL, "git is not installed: see `benchhub-agent doctor`.") from error


def _finish(partial: Path, final: Path) -> Path:
    if final.exists():
        shutil.rmtree(partial, ignore_errors=True)
    else:
        partial.rename(final)
    return final


def _source_root(folder: Path) -> Path:
    if (folder / "CMakeLists.txt").is_file():
        return folder
    children = [child for child in folder.iterdir() if (child / "CMakeLists.txt").is_file()]
    if len(children) != 1:
        raise AgentError(ExitCode.SOURCE, f"{folder} holds no llama.cpp source tree (no CMakeLists.txt).")
    return children[0]


def from_user(llama_src: Path, dirs: Dirs) -> Path:
    """A source directory is used as it is; a .tar.gz is extracted once into the cache."""
    if llama_src.is_dir():
        return _source_root(llama_src)
    if not llama_src.is_file() or not llama_src.name.endswith((".tar.gz", ".tgz")):
        raise AgentError(ExitCode.SOURCE, f"--llama-src {llama_src} is neither a directory nor a .tar.gz file.")
    stat = llama_src.stat()
    stamp = hashlib.sha256(f"{llama_src.resolve()}|{stat.st_size}|{stat.st_mtime_ns}".encode()).hexdigest()[:16]
    final = dirs.sources / f"tarball-{stamp}"
    if not final.exists():
        partial = final.with_name(final.name + ".partial")
        shutil.rmtree(partial, ignore_errors=True)
        partial.mkdir(parents=True)
        try:
            with tarfile.open(llama_src) as archive:
                archive.extractall(partial, filter="data")
        except (tarfile.TarError, OSError) as error:
            shutil.rmtree(partial, ignore_errors=True)
            raise AgentError(ExitCode.SOURCE, f"Could not extract {llama_src}: {error}.") from error
        _finish(partial, final)
    return _source_root(final)


def from_git(repo: str, commit: str, dirs: Dirs) -> Path:
    """Fetch exactly one commit (no history): minutes less than a clone of llama.cpp."""
    final = dirs.sources / f"git-{commit}"
    if (final / "CMakeLists.txt").is_file():
        return final
    partial = final.with_name(final.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    for args in (["init", "-q"], ["fetch", "-q", "--depth", "1", repo, commit], ["checkout", "-q", "FETCH_HEAD"]):
        done = _git(args, partial)
        if done.returncode != 0:
            shutil.rmtree(partial, ignore_errors=True)
            raise AgentError(
                ExitCode.SOURCE, f"git {args[0]} of {repo} at {commit[:12]} failed: {done.stderr.strip()[:300]}"
            )
    return _finish(partial, final)


def resolve_ref(repo: str, ref: str) -> str:
    done = subprocess.run(["git", "ls-remote", repo, ref], capture_output=True, text=True)
    commit = done.stdout.split()[0] if done.returncode == 0 and done.stdout.strip() else ""
    if len(commit) != 40:
        raise AgentError(ExitCode.SOURCE, f"Could not resolve {ref} on {repo}.")
    return commit


class WorkTree:
    """A copy of the pristine source that carries one variant's patches at a time."""

    def __init__(self, pristine: Path, path: Path) -> None:
        self.pristine = pristine
        self.path = path
        self.record = path / APPLIED_RECORD

    def ensure(self) -> None:
        if (self.path / "CMakeLists.txt").is_file():
            return
        partial = self.path.with_name(self.path.name + ".partial")
        shutil.rmtree(partial, ignore_errors=True)
        root = str(self.pristine)

        def skip(folder: str, names: list[str]) -> list[str]:
            # Only the top level's VCS data (a folder, or a submodule's `.git` file pointing elsewhere, which
            # would make `git apply` look for a repository that is not there) and its build folders; nested
            # names like cmake/build-info.cmake stay.
            if folder != root:
                return []
            return [
                name
                for name in names
                if name == ".git" or (name.startswith("build") and (self.pristine / name).is_dir())
            ]

        shutil.copytree(self.pristine, partial, ignore=skip, symlinks=True)
        _finish(partial, self.path)

    def _touched(self) -> list[str]:
        try:
            return list(json.loads(self.record.read_text()))
        except (OSError, ValueError):
            return []

    def restore(self) -> None:
        """Undo whatever a previous variant (or an interrupted run) left applied."""
        for relative in self._touched():
            original, current = self.pristine / relative, self.path / relative
            if original.is_file():
                current.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(original, current)  # copyfile, not copy2: a fresh mtime makes make rebuild
            else:
                current.unlink(missing_ok=True)
        self.record.unlink(missing_ok=True)

    def apply(self, patches: Sequence[Patch]) -> None:
        self.restore()
        touched: list[str] = []
        for patch in patches:
            listing = _git(["apply", "--numstat", str(patch.path)], self.path)
            touched += [line.split("\t")[-1] for line in listing.stdout.splitlines() if "\t" in line]
        # Recorded before the first byte changes, so an interrupted apply is undone by the next run.
        write_atomic(self.record, json.dumps(sorted(set(touched))).encode())
        for patch in patches:
            done = _git(["apply", "--whitespace=nowarn", str(patch.path)], self.path)
            if done.returncode != 0:
                self.restore()
                raise AgentError(
                    ExitCode.SOURCE, f"Patch {patch.name} does not apply to this llama.cpp: {done.stderr.strip()[:400]}"
                )
