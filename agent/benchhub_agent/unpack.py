"""Tar archives unpacked by the agent's own rules, not by `tarfile`'s extraction filters.

Python releases the agent may run on have published bypasses of the `data` filter (chains of links that
its path checks resolve differently from the file system), so `tarfile` is used here only to read
members, and this module decides and writes each one:

- a member's name is relative, without `..`, and no folder on its way is a link;
- regular files and folders are written with plain modes (0644, or 0755 when executable), a file opened
  with O_NOFOLLOW and O_EXCL after whatever stood at its name (an earlier member) was removed;
- a hard link becomes a copy of an earlier member; a symlink is kept only when, once everything is
  unpacked, it resolves inside the folder; devices, FIFOs and anything else are refused;
- the members together may unpack to at most MAX_BYTES.
A refusal raises AgentError(SOURCE) naming the member; the caller removes the partial folder.
"""

from __future__ import annotations

import os
import shutil
import stat
import tarfile
from pathlib import Path, PurePosixPath
from typing import IO

from .errors import AgentError, ExitCode

MAX_BYTES = 8 * 1024**3  # llama.cpp unpacks to about 200 MB
_CHUNK = 1024 * 1024


def _refuse(source: str, member: str, why: str) -> AgentError:
    return AgentError(ExitCode.SOURCE, f"{source} was refused: its member {member[:200]!r} {why}.")


def _relative(name: str) -> PurePosixPath | None:
    """The member's path inside the folder, None for the folder itself; ValueError when it leaves it."""
    if name.startswith("/") or "\\" in name or "\0" in name:
        raise ValueError("is an absolute or unusual path")
    parts = [part for part in PurePosixPath(name).parts if part not in ("", ".")]
    if ".." in parts:
        raise ValueError("climbs out with '..'")
    return PurePosixPath(*parts) if parts else None


def _folder(root: Path, relative: PurePosixPath) -> Path:
    """Create each folder of `relative` under root that is missing; ValueError when one is not a folder."""
    here = root
    for part in relative.parts:
        here = here / part
        try:
            mode = os.lstat(here).st_mode
        except FileNotFoundError:
            os.mkdir(here, 0o755)
            continue
        if not stat.S_ISDIR(mode):  # a link (or a file) where a folder should be: never followed
            raise ValueError(f"goes through {here.relative_to(root)}, which is not a folder")
    return here


def _clear(path: Path) -> None:
    """Remove an earlier member at this name (a file or a link, never followed)."""
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return
    if stat.S_ISDIR(mode):
        raise ValueError("would replace a folder")
    os.unlink(path)


def _write(path: Path, data: IO[bytes] | None, executable: bool, budget: list[int]) -> None:
    _clear(path)
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    descriptor = os.open(path, flags, 0o755 if executable else 0o644)
    with os.fdopen(descriptor, "wb") as out:
        while data is not None and (chunk := data.read(_CHUNK)):
            budget[0] -= len(chunk)
            if budget[0] < 0:
                raise ValueError(f"makes the archive unpack to more than {MAX_BYTES // 1024**3} GiB")
            out.write(chunk)


def extract(archive: tarfile.TarFile, root: Path, source: str) -> None:
    """Unpack every member of `archive` (open for reading, seekable or a stream) into the folder `root`."""
    budget = [MAX_BYTES]
    links: list[Path] = []
    files: set[PurePosixPath] = set()
    for member in archive:
        try:
            relative = _relative(member.name)
            if relative is None:
                continue
            if member.isdir():
                _folder(root, relative)
                continue
            parent = _folder(root, relative.parent)
            target = parent / relative.name
            if member.isreg():
                _write(target, archive.extractfile(member), bool(member.mode & 0o100), budget)
                files.add(relative)
            elif member.islnk():
                original = _relative(member.linkname)
                if original not in files:
                    raise ValueError("is a hard link to no earlier file of the archive")
                _clear(target)
                shutil.copyfile(root / str(original), target, follow_symlinks=False)
                files.add(relative)
            elif member.issym():
                if member.linkname.startswith("/") or not member.linkname or "\0" in member.linkname:
                    raise ValueError("is a symlink to an absolute path")
                _clear(target)
                os.symlink(member.linkname, target)
                links.append(target)
            else:
                raise ValueError("is a device, a FIFO or another special file")
        except ValueError as error:
            raise _refuse(source, member.name, str(error)) from error
    real_root = root.resolve()
    for link in links:  # once all exist: a chain of links is judged by where it really ends
        try:
            resolved = link.resolve()
        except (RuntimeError, OSError):  # a loop of links
            resolved = Path("/")
        if resolved != real_root and real_root not in resolved.parents:
            raise _refuse(source, str(link.relative_to(root)), "is a symlink that leads out of the folder")
