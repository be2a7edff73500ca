"""A working tree that takes one variant's patches at a time and is given back exactly by git.

The pristine source (a git export, a user's directory or an extracted tarball) is never written to. It is
snapshotted into a git object store of the agent's (`snapshot`): the resulting tree id names the exact
source a build compiles, so it is part of the binary cache's key. The working tree is that tree checked
out with its own index; before each variant, `git read-tree --reset -u` and `git clean` put back every
path a patch changed (content, type, mode, renames, files it added) and nothing else. Git removes a path
before writing it, so a restore never writes through a link, and it never deletes outside the tree.
Files it leaves alone keep their mtime, so make recompiles only what the previous variant (or another
commit's tree) changed.

A patch is checked before any byte is written: every path it names must be relative, without `..` or a
`.git` component, and reach no symlink in the tree; and it must create no symlink or submodule.
"""

from __future__ import annotations

import codecs
import hashlib
import os
import re
import subprocess
from collections.abc import Iterable, Sequence
from pathlib import Path, PurePosixPath

from .campaign import Patch
from .errors import AgentError, ExitCode
from .source import locked

# Content as it is: no line-ending, keyword or encoding conversion, whatever a tree's .gitattributes say.
ATTRIBUTES = "* -text -eol -ident -filter -working-tree-encoding\n"
_CONFIG = (
    "-c",
    "core.autocrlf=false",
    "-c",
    "core.symlinks=true",
    "-c",
    "core.fileMode=true",
    "-c",
    "core.hooksPath=/dev/null",
    "-c",
    "core.fsmonitor=false",
)
# Only the top level's build folders are left out (a developer's checkout keeps its builds there);
# build.zig or cmake/build-info.cmake stay.
_NOT_SOURCE = ":(exclude,glob)build*/**"
_HEADER_PATH = re.compile(r"^(?:--- |\+\+\+ |rename from |rename to |copy from |copy to )(.+)$", re.M)
_MODE = re.compile(r"^(?:new file mode|new mode|old mode|deleted file mode) (\d+)$|^index \S+ (\d+)$", re.M)
_LINK_MODES = ("120000", "160000")  # a symlink, a submodule


def _git(args: Sequence[str], store: Path, work: Path, index: Path) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "GIT_DIR": str(store),
        "GIT_WORK_TREE": str(work),
        "GIT_INDEX_FILE": str(index),
        "GIT_CEILING_DIRECTORIES": str(work.parent),
        "GIT_TERMINAL_PROMPT": "0",
        "GIT_CONFIG_NOSYSTEM": "1",
    }
    try:
        return subprocess.run(["git", *_CONFIG, *args], cwd=work, env=env, capture_output=True, text=True)
    except FileNotFoundError as error:
        raise AgentError(ExitCode.MISSING_TOOL, "git is not installed: see `benchhub-agent doctor`.") from error


def _checked(done: subprocess.CompletedProcess[str], what: str) -> str:
    if done.returncode != 0:
        raise AgentError(ExitCode.SOURCE, f"{what} failed: {done.stderr.strip()[:300]}")
    return done.stdout.strip()


def _store(store: Path) -> Path:
    if not (store / "HEAD").is_file():
        store.mkdir(parents=True, exist_ok=True)
        done = subprocess.run(["git", "init", "-q", "--bare", str(store)], capture_output=True, text=True)
        _checked(done, f"git init {store}")
    attributes = store / "info" / "attributes"
    if not attributes.is_file() or attributes.read_text() != ATTRIBUTES:
        attributes.parent.mkdir(parents=True, exist_ok=True)
        attributes.write_text(ATTRIBUTES)
    return store


def snapshot(pristine: Path, store: Path) -> str:
    """The git tree id of `pristine` as the agent builds it: the same id for the same files, types and
    modes, another for any difference. Hashed once; a later call re-reads only files whose stat changed."""
    _store(store)
    index = store / "snapshots" / hashlib.sha256(str(pristine.resolve()).encode()).hexdigest()[:24]
    index.parent.mkdir(parents=True, exist_ok=True)
    with locked(index.with_name(index.name + ".agent-lock")):  # git itself takes <index>.lock
        _checked(_git(["add", "-A", "-f", "--", ".", _NOT_SOURCE], store, pristine, index), f"Reading {pristine}")
        return _checked(_git(["write-tree"], store, pristine, index), f"Reading {pristine}")


def _unquoted(text: str) -> str:
    """A header's path as git reads it: a quoted one has C escapes (`"\\056\\056/x"` is `../x`)."""
    path = text.split("\t", 1)[0].strip()
    if len(path) > 1 and path[0] == path[-1] == '"':
        path = codecs.escape_decode(path[1:-1].encode())[0].decode("utf-8", errors="replace")
    return path


def patch_paths(text: str, numstat: str) -> list[str]:
    """Every path a patch may write or delete: its headers' (both names of a rename or copy) and those
    `git apply --numstat -z` reports."""
    found = set()
    for match in _HEADER_PATH.finditer(text):
        line, path = match.group(0), _unquoted(match.group(1))
        if path == "/dev/null":
            continue
        if line.startswith(("--- ", "+++ ")) and path[:2] in ("a/", "b/"):
            path = path[2:]
        found.add(path)
    for record in numstat.split("\0"):
        if record.count("\t") >= 2:
            found.add(record.split("\t", 2)[2])
    return sorted(found)


def path_problem(tree: Path, relative: str) -> str | None:
    """Why a patch may not touch `relative` in `tree` (None when it may)."""
    path = PurePosixPath(relative)
    if not relative or relative.startswith("/") or path.is_absolute() or "\\" in relative:
        return "is not a relative path"
    if any(part == ".." for part in path.parts):
        return "climbs out of the tree with '..'"
    if any(part.lower() == ".git" for part in path.parts):
        return "names a .git folder"
    here = tree
    for part in path.parts:
        here = here / part
        if here.is_symlink():
            return f"goes through the symlink {here.relative_to(tree)}"
    return None


class WorkTree:
    """The pristine tree checked out into `path`, carrying one variant's patches at a time."""

    def __init__(self, pristine: Path, path: Path, store: Path | None = None) -> None:
        self.pristine = pristine
        self.path = path
        self.store = store or path.with_name(path.name + ".git")
        self.index = path.with_name(path.name + ".index")
        self.tree = ""

    def _git(self, *args: str) -> subprocess.CompletedProcess[str]:
        return _git(args, self.store, self.path, self.index)

    def ensure(self) -> None:
        """The working tree mirrors the pristine tree, no patch applied."""
        self.tree = snapshot(self.pristine, self.store)
        self.path.mkdir(parents=True, exist_ok=True)
        self.restore()

    def restore(self) -> None:
        """Every path back as the pristine tree has it and nothing else: what a previous variant or an
        interrupted run changed, added, renamed or turned into something else."""
        if not self.tree:
            self.tree = snapshot(self.pristine, self.store)
        _checked(self._git("read-tree", "--reset", "-u", self.tree), f"Restoring the working tree {self.path}")
        _checked(self._git("clean", "-ffdxq"), f"Restoring the working tree {self.path}")

    def check(self, patches: Iterable[Patch]) -> None:
        """Refuse, before anything is written, a patch that reaches outside the tree or makes a link."""
        for patch in patches:
            text = Path(patch.path).read_text(errors="replace")
            numstat = self._git("apply", "--numstat", "-z", "--", str(patch.path)).stdout
            modes = [mode for pair in _MODE.findall(text) for mode in pair if mode]
            if any(mode in _LINK_MODES for mode in modes):
                raise AgentError(ExitCode.SOURCE, f"Patch {patch.name} creates a symlink or a submodule: refused.")
            for relative in patch_paths(text, numstat):
                problem = path_problem(self.path, relative)
                if problem:
                    raise AgentError(
                        ExitCode.SOURCE, f"Patch {patch.name} names {relative[:200]!r}, which {problem}: refused."
                    )

    def apply(self, patches: Sequence[Patch]) -> None:
        self.restore()
        self.check(patches)
        for patch in patches:
            done = self._git("apply", "--whitespace=nowarn", "--", str(patch.path))
            if done.returncode != 0:
                self.restore()
                raise AgentError(
                    ExitCode.SOURCE, f"Patch {patch.name} does not apply to this llama.cpp: {done.stderr.strip()[:400]}"
                )
