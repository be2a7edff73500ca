"""llama.cpp source: a pinned commit fetched with git, or the user's directory or tarball (--llama-src).

Each becomes a pristine tree that is never written to (worktree.py checks it out to patch and build).
Archives, git's own export included, are unpacked by unpack.py's rules, not tarfile's filters. Every
git command that reaches the network has a deadline (exit code 15), so a repository that trickles
cannot hold the agent.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import tarfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from . import unpack
from .dirs import Dirs
from .errors import AgentError, ExitCode

FETCH_DEADLINE_S = 1800.0  # one commit of llama.cpp is about 30 MB
_HASH_CHUNK = 16 * 1024 * 1024
# Git reaches a repository over https or file:// only (the manifest's rule), and so does any redirect
# it follows: git hands curl only the protocols allowed here.
PROTOCOLS = (
    "-c",
    "protocol.allow=never",
    "-c",
    "protocol.https.allow=always",
    "-c",
    "protocol.file.allow=always",
)


def _deadline(args: Sequence[str], limit_s: float) -> AgentError:
    return AgentError(
        ExitCode.DEADLINE, f"Stopped waiting: git {args[0]} took longer than its {limit_s:.0f} s deadline."
    )


def _git(args: Sequence[str], cwd: Path, timeout_s: float | None = None) -> subprocess.CompletedProcess[str]:
    # Callers put `--` before every positional argument: a repo or commit that starts with '-' is then
    # never read as an option (`--upload-pack=...` runs a command).
    # A ceiling stops git from finding an enclosing repository (BENCHHUB_HOME may sit inside one):
    # `git apply` run under another repo resolves paths against that repo and silently skips patches.
    env = {**os.environ, "GIT_CEILING_DIRECTORIES": str(cwd.parent), "GIT_TERMINAL_PROMPT": "0"}
    try:
        command = ["git", *PROTOCOLS, *args]
        return subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout_s)
    except FileNotFoundError as error:
        raise AgentError(ExitCode.MISSING_TOOL, "git is not installed: see `benchhub-agent doctor`.") from error
    except subprocess.TimeoutExpired as error:
        raise _deadline(args, timeout_s or 0) from error


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


def _file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(_HASH_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def from_user(llama_src: Path, dirs: Dirs) -> Path:
    """A source directory is used as it is; a .tar.gz is unpacked once into the cache, under the hash of
    its bytes (another tarball at the same path, size and mtime is another folder)."""
    if llama_src.is_dir():
        return _source_root(llama_src)
    if not llama_src.is_file() or not llama_src.name.endswith((".tar.gz", ".tgz")):
        raise AgentError(ExitCode.SOURCE, f"--llama-src {llama_src} is neither a directory nor a .tar.gz file.")
    final = dirs.sources / f"tarball-{_file_sha256(llama_src)[:24]}"
    if not final.exists():
        partial = final.with_name(final.name + ".partial")
        shutil.rmtree(partial, ignore_errors=True)
        partial.mkdir(parents=True)
        try:
            with tarfile.open(llama_src) as archive:
                unpack.extract(archive, partial, f"--llama-src {llama_src}")
        except (tarfile.TarError, OSError, AgentError) as error:
            shutil.rmtree(partial, ignore_errors=True)  # never follows a link it removes
            if isinstance(error, AgentError):
                raise
            raise AgentError(ExitCode.SOURCE, f"Could not extract {llama_src}: {error}.") from error
        _finish(partial, final)
    return _source_root(final)


@contextmanager
def locked(path: Path) -> Iterator[None]:
    """One writer at a time: two agents sharing a cache must not fetch into or patch the same tree at once."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def from_git(repo: str, commit: str, dirs: Dirs) -> Path:
    """Fetch exactly one commit (no history) into one object store shared by every commit, and export
    its tree. A second commit downloads only the objects the first did not bring: a pull request
    branch costs the files it changes, not another copy of llama.cpp."""
    final = dirs.sources / f"git-{commit}"
    if (final / "CMakeLists.txt").is_file():
        return final
    store = dirs.sources / "git-objects"
    with locked(dirs.sources / "git-objects.lock"):
        if not (store / "HEAD").is_file():
            store.mkdir(parents=True, exist_ok=True)
            _checked_git(["init", "-q", "--bare"], store, repo, commit)
        if _git(["cat-file", "-e", "--", f"{commit}^{{commit}}"], store).returncode != 0:
            _checked_git(["fetch", "-q", "--depth", "1", "--", repo, commit], store, repo, commit, FETCH_DEADLINE_S)
            # A ref per commit: the next fetch offers these as common ground, and gc keeps them.
            _checked_git(["update-ref", "--", f"refs/benchhub/{commit}", commit], store, repo, commit)
        partial = final.with_name(final.name + ".partial")
        shutil.rmtree(partial, ignore_errors=True)
        partial.mkdir(parents=True)
        try:
            _export(store, commit, partial)
        except BaseException:
            shutil.rmtree(partial, ignore_errors=True)
            raise
        return _finish(partial, final)


def _checked_git(args: list[str], cwd: Path, repo: str, commit: str, timeout_s: float | None = None) -> None:
    done = _git(args, cwd, timeout_s)
    if done.returncode != 0:
        raise AgentError(
            ExitCode.SOURCE, f"git {args[0]} of {repo} at {commit[:12]} failed: {done.stderr.strip()[:300]}"
        )


def _export(store: Path, commit: str, target: Path) -> None:
    env = {**os.environ, "GIT_CEILING_DIRECTORIES": str(store.parent)}
    with subprocess.Popen(
        ["git", "archive", "--format=tar", "--", commit],
        cwd=store,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    ) as process:
        assert process.stdout is not None
        try:
            with tarfile.open(fileobj=process.stdout, mode="r|") as archive:
                unpack.extract(archive, target, f"llama.cpp {commit[:12]}")
        except (tarfile.TarError, AgentError) as error:
            process.kill()
            if isinstance(error, AgentError):
                raise
            raise AgentError(ExitCode.SOURCE, f"Could not export llama.cpp {commit[:12]}: {error}.") from error
        stderr = process.stderr.read().decode(errors="replace") if process.stderr else ""
    if process.returncode != 0:
        raise AgentError(ExitCode.SOURCE, f"Could not export llama.cpp {commit[:12]}: {stderr.strip()[:300]}")
