"""llama.cpp source at a pinned commit, and a working tree that takes a variant's patches and gives
them back, so that variants share one build directory and a later variant recompiles only what its
patches touch.

The pristine tree (one per commit: a git export, a user's directory or an extracted tarball) is never
written to. The working tree is a copy; before each variant the files the previous variant touched
are restored from the pristine tree with a fresh mtime, so make sees them as changed. A variant at
another commit moves the same working tree to that commit's pristine tree, rewriting only the files
that differ, so it too recompiles only what the commits change.
"""

from __future__ import annotations

import fcntl
import filecmp
import hashlib
import json
import os
import shutil
import subprocess
import tarfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from .campaign import Patch
from .dirs import Dirs, write_atomic
from .errors import AgentError, ExitCode

APPLIED_RECORD = ".benchhub-applied.json"
BASE_RECORD = ".benchhub-base"  # which pristine tree the working tree mirrors


def _git(args: Sequence[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    # Callers put `--` before every positional argument: a repo or commit that starts with '-' is then
    # never read as an option (`--upload-pack=...` runs a command).
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
            _checked_git(["fetch", "-q", "--depth", "1", "--", repo, commit], store, repo, commit)
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


def _checked_git(args: list[str], cwd: Path, repo: str, commit: str) -> None:
    done = _git(args, cwd)
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
                archive.extractall(target, filter="data")
        except tarfile.TarError as error:
            process.kill()
            raise AgentError(ExitCode.SOURCE, f"Could not export llama.cpp {commit[:12]}: {error}.") from error
        stderr = process.stderr.read().decode(errors="replace") if process.stderr else ""
    if process.returncode != 0:
        raise AgentError(ExitCode.SOURCE, f"Could not export llama.cpp {commit[:12]}: {stderr.strip()[:300]}")


def resolve_ref(repo: str, ref: str) -> str:
    """The commit a ref points to now (`git ls-remote`: nothing is fetched). Only the ref itself counts:
    ls-remote also lists refs that merely end with the pattern."""
    env = {**os.environ, "GIT_TERMINAL_PROMPT": "0"}
    try:
        done = subprocess.run(["git", "ls-remote", "--", repo, ref], capture_output=True, text=True, env=env)
    except FileNotFoundError as error:
        raise AgentError(ExitCode.MISSING_TOOL, "git is not installed: see `benchhub-agent doctor`.") from error
    commits = [line.split("\t")[0] for line in done.stdout.splitlines() if line.endswith(f"\t{ref}")]
    if done.returncode != 0 or len(commits) != 1 or len(commits[0]) != 40:
        reason = done.stderr.strip()[:300] or "no such ref"
        raise AgentError(ExitCode.SOURCE, f"Could not resolve {ref} on {repo}: {reason}.")
    return commits[0]


def _skipped_at_top(root: Path, name: str) -> bool:
    """Only the top level's VCS data (a folder, or a submodule's `.git` file pointing elsewhere, which would
    make `git apply` look for a repository that is not there), its build folders and our own records;
    nested names like cmake/build-info.cmake stay."""
    return name in (".git", APPLIED_RECORD, BASE_RECORD) or (name.startswith("build") and (root / name).is_dir())


def _files(root: Path) -> dict[str, Path]:
    """Every file and symlink under root by relative path, without what `_skipped_at_top` leaves out."""
    found: dict[str, Path] = {}
    for folder, dirnames, filenames in os.walk(root):
        here = Path(folder)
        if here == root:
            dirnames[:] = [name for name in dirnames if not _skipped_at_top(root, name)]
            filenames = [name for name in filenames if not _skipped_at_top(root, name)]
        links = [name for name in dirnames if (here / name).is_symlink()]  # a link to a folder is one entry
        for name in [*filenames, *links]:
            found[str((here / name).relative_to(root))] = here / name
    return found


def _same_file(original: Path, current: Path) -> bool:
    if original.is_symlink() or current.is_symlink():
        return original.is_symlink() and current.is_symlink() and os.readlink(original) == os.readlink(current)
    return current.is_file() and filecmp.cmp(original, current, shallow=False)


class WorkTree:
    """A copy of the pristine source that carries one variant's patches at a time."""

    def __init__(self, pristine: Path, path: Path) -> None:
        self.pristine = pristine
        self.path = path
        self.record = path / APPLIED_RECORD

    def ensure(self) -> None:
        """The working tree exists and mirrors this pristine tree (no patches applied)."""
        if (self.path / "CMakeLists.txt").is_file():
            if self._base() != self._pristine_id():
                self.restore()
                self._move_to_pristine()
            return
        partial = self.path.with_name(self.path.name + ".partial")
        shutil.rmtree(partial, ignore_errors=True)
        root = str(self.pristine)

        def skip(folder: str, names: list[str]) -> list[str]:
            return [name for name in names if _skipped_at_top(self.pristine, name)] if folder == root else []

        shutil.copytree(self.pristine, partial, ignore=skip, symlinks=True)
        (partial / BASE_RECORD).write_text(self._pristine_id())
        _finish(partial, self.path)

    def _pristine_id(self) -> str:
        return str(self.pristine.resolve())

    def _base(self) -> str | None:
        try:
            return (self.path / BASE_RECORD).read_text()
        except OSError:
            return None

    def _move_to_pristine(self) -> None:
        """Rewrite only the files that differ from the new pristine tree and delete those it lacks: make
        then rebuilds what the two commits change and nothing else."""
        (self.path / BASE_RECORD).unlink(missing_ok=True)  # a crash midway leaves a tree that is synced again
        wanted = _files(self.pristine)
        present = _files(self.path)
        for relative in present.keys() - wanted.keys():
            present[relative].unlink()
        for relative, original in wanted.items():
            current = self.path / relative
            if _same_file(original, current):
                continue
            if current.is_symlink() or current.is_file():
                current.unlink()
            current.parent.mkdir(parents=True, exist_ok=True)
            if original.is_symlink():
                current.symlink_to(os.readlink(original))
            else:
                shutil.copyfile(original, current)  # a fresh mtime: make rebuilds what includes it
        (self.path / BASE_RECORD).write_text(self._pristine_id())

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
            listing = _git(["apply", "--numstat", "--", str(patch.path)], self.path)
            touched += [line.split("\t")[-1] for line in listing.stdout.splitlines() if "\t" in line]
        # Recorded before the first byte changes, so an interrupted apply is undone by the next run.
        write_atomic(self.record, json.dumps(sorted(set(touched))).encode())
        for patch in patches:
            done = _git(["apply", "--whitespace=nowarn", "--", str(patch.path)], self.path)
            if done.returncode != 0:
                self.restore()
                raise AgentError(
                    ExitCode.SOURCE, f"Patch {patch.name} does not apply to this llama.cpp: {done.stderr.strip()[:400]}"
                )
