"""Every file the repository's prose names is in the repository: no reference dangles.

A reference is a path-like word ending in a file extension (`docs/protocol.md`, `results/ingest.py`),
read from Markdown files and templates and from the comments and docstrings of Python files. It resolves when a
tracked file has that path, relative to the referring file or to the root, or ends with it
(`results/ingest.py` is `benchhub/results/ingest.py`).
A Python string is prose when it is triple-quoted or holds a space; a lone file name in code is data.
URLs, absolute paths, home paths and patterns (`*`, `{`, `<`, `$`) are not references, and neither
are the few names of files that live elsewhere (NOT_HERE: llama.cpp's sources, what a command writes).
"""

from __future__ import annotations

import io
import re
import subprocess
import tokenize
from collections.abc import Iterator
from pathlib import Path, PurePosixPath

ROOT = Path(__file__).resolve().parents[2]
EXTENSIONS = "md|py|json|sh|toml|yml|yaml|txt|patch|html|cfg|ini"
REFERENCE = re.compile(rf"(?<![\w./~:@$*{{<-])((?:\.\./|\./)*[\w.+-]*(?:/[\w.+-]+)*\.(?:{EXTENSIONS}))(?![\w/-])")
# Files named on purpose that are not in this repository, each with where it lives.
NOT_HERE = {
    "gguf/constants.py": "llama.cpp's gguf-py",
    "CMakeLists.txt": "llama.cpp's build",
    "CMakePresets.json": "llama.cpp's build",
    "compile_commands.json": "written by cmake",
    "docs/build.md": "llama.cpp's docs",
    "docs/ops/Metal.csv": "llama.cpp's docs",
    "cuda-summary.json": "written by tests/e2e/cuda_on_device.sh",
    "analysis.txt": "a recording's side output",
    "extra.txt": "a recording's side output",
    "cells.json": "written by scripts/recompute_cells.py",
    "machine.json": "written by the agent in its home, beside the key",
    "board.json": "written by a test in its temporary folder",
    "response.json": "a name in a test's request",
    "plotly.py": "the Plotly library",
    "index.json": "written beside the snapshot files by the snapshot task",
    "scaleout.json": "written by python -m bench scaleout",
    "scaleout-bundle/scaleout_device.sh": "the copy of scripts/scaleout_device.sh in the bundle",
}


def tracked_files(root: Path) -> list[str]:
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard"],
        cwd=root,
        capture_output=True,
        text=True,
        check=True,
    )
    return [line for line in listed.stdout.splitlines() if (root / line).is_file()]


def python_prose(text: str) -> Iterator[tuple[int, str]]:
    """(line, text) for every comment and prose string of a module."""
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(text).readline))
    except (tokenize.TokenError, SyntaxError):
        return
    for token in tokens:
        if token.type == tokenize.COMMENT:
            yield token.start[0], token.string
        elif token.type == tokenize.STRING:
            body = token.string.lstrip("rbuRBUfF")
            if body.startswith(('"""', "'''")) or " " in body:
                yield token.start[0], token.string


def markdown_prose(text: str) -> Iterator[tuple[int, str]]:
    yield from enumerate(text.splitlines(), 1)


def references(path: str, text: str) -> Iterator[tuple[int, str]]:
    chunks = python_prose(text) if path.endswith(".py") else markdown_prose(text)
    for number, chunk in chunks:
        for match in REFERENCE.finditer(chunk):
            reference = match.group(1)
            if reference.startswith("/") or reference in NOT_HERE:
                continue
            if reference.startswith(".") and not reference.startswith(("./", "../")):
                continue  # `.py`, `.md`: a kind of file, not a file
            yield number, reference


def resolves(reference: str, referrer: str, files: set[str]) -> bool:
    wanted = PurePosixPath(reference)
    candidates = {
        str(PurePosixPath(_normal(PurePosixPath(referrer).parent / wanted))),
        str(PurePosixPath(_normal(wanted))),
    }
    if candidates & files:
        return True
    if reference.startswith("../"):
        return False  # outside the referring folder: it must resolve exactly
    suffix = "/" + str(_normal(wanted))
    return any(name.endswith(suffix) or name == str(_normal(wanted)) for name in files)


def _normal(path: PurePosixPath) -> PurePosixPath:
    parts: list[str] = []
    for part in path.parts:
        if part == "..":
            if not parts:
                return PurePosixPath("..", *path.parts)  # above the root: never a repository file
            parts.pop()
        elif part != ".":
            parts.append(part)
    return PurePosixPath(*parts)


def dangling(root: Path) -> list[tuple[str, int, str]]:
    files = set(tracked_files(root))
    found = []
    for path in sorted(files):
        if not path.endswith((".md", ".py", ".html")):
            continue
        text = (root / path).read_text(encoding="utf-8", errors="replace")
        for number, reference in references(path, text):
            if not resolves(reference, path, files):
                found.append((path, number, reference))
    return found


def test_no_reference_in_the_repository_dangles() -> None:
    assert dangling(ROOT) == []


def test_it_finds_a_reference_to_a_file_outside_the_repository(tmp_path: Path) -> None:
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "protocol.md").write_text("The contract.\n")
    # Written in pieces with no space, so that this file's own strings name no missing file.
    missing, seeds, space = "PROTOCOL" + ".md", "SEEDS" + ".md", chr(32)
    readme = ["See", "docs/protocol.md", "and", f"../shared/{missing},", "not", "https://x.org/a.md.\n"]
    module = ['"""Section', "5.1", "of", f'{missing}."""\n\nNAME', "=", '"late.py"', "", "#", "as", seeds, "says\n"]
    (tmp_path / "README.md").write_text(space.join(readme))
    (tmp_path / "m.py").write_text(space.join(module))
    assert dangling(tmp_path) == [("README.md", 1, f"../shared/{missing}"), ("m.py", 1, missing), ("m.py", 3, seeds)]
