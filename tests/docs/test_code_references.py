"""Every name of the code that the prose quotes is in the code: a module's function, class or
constant (`cells.refresh_group`, `benchhub_protocol.cycles.submission_estimate`), a numbered section
of a doc (`docs/protocol.md section 7`), and the README's layout against the tree.

A code reference is a dotted name in a Markdown file or in a comment or docstring of a Python file
outside tests/: its longest leading part that names a module of the repository (a file's dotted
path, or the end of one: `results.cells`, `cells`) must define the next part (a def, a class, an
assignment or an import at its top level). Dotted names that are payload or tool fields
(`sweep.cycles`, `machine.chip`) and file names (`ingest.py`) are not code references, and neither
are the markers `<!-- = EXPR -->` (test_quoted_constants.py evaluates those).
"""

from __future__ import annotations

import ast
import io
import re
import subprocess
import tokenize
from collections.abc import Iterator
from pathlib import Path

from tests.docs.test_references import tracked_files

ROOT = Path(__file__).resolve().parents[2]
# Names that read like a module but, in prose, are a payload object, a tool's key or a variable.
NOT_MODULES = {
    "sweep": "the payload's sweep object (4.4), also the agent's sweep.py",
    "machine": "the payload's machine object (4.2)",
    "model": "the payload's model object (4.3)",
    "llama_cpp": "the payload's build facts",
    "settings": "a settings object: Django's, or the agent's sweep settings",
}
FILE_ENDINGS = {
    *("py", "md", "json", "jsonl", "sh", "toml", "yml", "yaml", "txt", "patch", "html", "cfg", "ini", "gguf"),
    *("metal", "h", "c", "cpp", "cu", "tsv", "csv", "gz", "whl", "log", "png", "svg", "js", "css", "example"),
    *("org", "com", "io", "net", "sqlite3", "pem", "zig", "cmake"),
}
DOTTED = re.compile(r"(?<![\w./@$-])([a-z_][a-z_0-9]*(?:\.[A-Za-z_][A-Za-z_0-9]*)+)(?![\w/-])")
MARKER = re.compile(r"<!--.*?-->")
SECTION = re.compile(r"([\w./-]+\.md),? section (\d+(?:\.\d+)*)")
HEADING = re.compile(r"^#+\s+(\d+(?:\.\d+)*)\.?\s", re.M)


def top_level_names(tree: ast.Module) -> set[str]:
    """What `module.NAME` can reach: defs, classes, assignments and imports at the top level,
    those under a top-level if or try included."""
    names: set[str] = set()
    nodes: list[ast.stmt] = list(tree.body)
    while nodes:
        node = nodes.pop()
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(n.id for target in targets for n in ast.walk(target) if isinstance(n, ast.Name))
        elif isinstance(node, ast.Import | ast.ImportFrom):
            names.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
        elif isinstance(node, ast.If | ast.Try):
            nodes.extend([*node.body, *node.orelse, *getattr(node, "finalbody", [])])
            nodes.extend(statement for handler in getattr(node, "handlers", []) for statement in handler.body)
    return names


def modules(root: Path, files: list[str]) -> dict[str, set[str]]:
    """Dotted path of every module outside tests/ (a package by its folder) -> its top-level names."""
    found: dict[str, set[str]] = {}
    for path in files:
        if not path.endswith(".py") or path.startswith("tests/") or "/migrations/" in path:
            continue
        try:
            tree = ast.parse((root / path).read_text(encoding="utf-8"))
        except SyntaxError:
            continue
        dotted = path[: -len(".py")].replace("/", ".").removesuffix(".__init__")
        found.setdefault(dotted, set()).update(top_level_names(tree))
    return found


def prose(path: str, text: str) -> Iterator[tuple[int, str]]:
    """(line, text) of a Markdown file's lines less its markers, or a module's comments and docstrings."""
    if path.endswith(".md"):
        for number, line in enumerate(text.splitlines(), 1):
            yield number, MARKER.sub("", line)
        return
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(text).readline))
    except (tokenize.TokenError, SyntaxError):
        return
    for token in tokens:
        if token.type == tokenize.COMMENT:
            yield token.start[0], token.string
        elif token.type == tokenize.STRING and token.string.lstrip("rbuRBU").startswith(('"""', "'''")):
            yield token.start[0], token.string  # an f-string's text is code (SQL), not prose


def unknown_name(reference: str, found: dict[str, set[str]]) -> str | None:
    """None where the reference resolves or names no module; else what is missing."""
    parts = reference.split(".")
    if parts[-1] in FILE_ENDINGS:
        return None
    for end in range(len(parts), 0, -1):
        prefix = ".".join(parts[:end])
        candidates = [names for dotted, names in found.items() if dotted == prefix or dotted.endswith("." + prefix)]
        if not candidates:
            continue
        if end == 1 and prefix in NOT_MODULES:
            return None
        if end == len(parts) or any(parts[end] in names for names in candidates):
            return None
        return f"{prefix} has no {parts[end]}"
    return None


def unknown_sections(root: Path, files: list[str], path: str, text: str) -> Iterator[tuple[int, str]]:
    for number, chunk in prose(path, text):
        for match in SECTION.finditer(chunk):
            doc, section = match.groups()
            targets = [name for name in files if name == doc or name.endswith("/" + doc)]
            if not targets:
                continue  # a missing file is test_references.py's to report
            headings = set(HEADING.findall((root / targets[0]).read_text(encoding="utf-8")))
            if section not in headings:
                yield number, f"{doc} has no section {section}"


def broken_references(root: Path) -> list[str]:
    files = tracked_files(root)
    found = modules(root, files)
    broken = []
    for path in files:
        if not path.endswith((".md", ".py")) or (path.endswith(".py") and path.startswith("tests/")):
            continue
        text = (root / path).read_text(encoding="utf-8", errors="replace")
        for number, chunk in prose(path, text):
            for match in DOTTED.finditer(chunk):
                missing = unknown_name(match.group(1), found)
                if missing:
                    broken.append(f"{path}:{number}: {match.group(1)} ({missing})")
        broken.extend(f"{path}:{number}: {what}" for number, what in unknown_sections(root, files, path, text))
    return broken


def test_every_name_the_prose_quotes_is_in_the_code() -> None:
    assert broken_references(ROOT) == []


def test_it_goes_red_when_a_quoted_function_is_renamed(tmp_path: Path) -> None:
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "cells.py").write_text("def refresh_group():\n    pass\n\n\nLIMIT = 3\n")
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "protocol.md").write_text("# Protocol\n\n## 7. Cells\n\n### 7.1 Keys\n")
    readme = "`cells.refresh_group` (docs/protocol.md section 7.1) reads `pkg.cells.LIMIT` and `sweep.cycles`.\n"
    (tmp_path / "README.md").write_text(readme)
    assert broken_references(tmp_path) == []
    (tmp_path / "pkg" / "cells.py").write_text("def refresh_groups():\n    pass\n\n\nLIMIT = 3\n")
    (tmp_path / "README.md").write_text(readme.replace("7.1", "7.2"))
    assert broken_references(tmp_path) == [
        "README.md:1: cells.refresh_group (cells has no refresh_group)",
        "README.md:1: docs/protocol.md has no section 7.2",
    ]


LAYOUT = re.compile(r"## Layout\n\n```\n(.*?)```", re.S)
ENTRY = re.compile(r"^( *)((?:[\w.-]+/ ?)+)")
NAMED = re.compile(r"(?<![\w./-])([\w-]+(?:\.(?:py|md)|/))(?![\w/])")


def layout_mismatches(root: Path) -> list[str]:
    """The README's layout block against the tree: every folder it lists is there, under the folder
    it is indented under, and every file its description names is in that folder (a folder it names
    is there or at the root)."""
    block = LAYOUT.search((root / "README.md").read_text(encoding="utf-8"))
    assert block, "README.md has no ## Layout block"
    wrong = []
    parents: list[tuple[int, Path]] = []
    here: list[Path] = [root]
    for line in block.group(1).splitlines():
        entry = ENTRY.match(line)
        description = line
        if entry:
            indent = len(entry.group(1))
            parents = [(depth, folder) for depth, folder in parents if depth < indent]
            base = parents[-1][1] if parents else root
            here = [base / name.strip() for name in entry.group(2).split()]
            parents.append((indent, here[0]))
            description = line[entry.end() :]
            wrong += [f"{folder.relative_to(root)}/ is not a folder" for folder in here if not folder.is_dir()]
        for name in NAMED.findall(description):
            # A folder may be named from anywhere ("depends on protocol/"); a file only where it lies.
            places = [*here, root] if name.endswith("/") else here
            if not any((folder / name).exists() for folder in places):
                wrong.append(f"{name} is not in {', '.join(str(f.relative_to(root)) + '/' for f in here)}")
    return wrong


def test_the_readme_layout_is_the_tree() -> None:
    assert layout_mismatches(ROOT) == []


def test_the_layout_check_sees_a_file_in_the_wrong_folder(tmp_path: Path) -> None:
    (tmp_path / "app" / "results").mkdir(parents=True)
    (tmp_path / "app" / "results" / "cells.py").write_text("")
    (tmp_path / "app" / "stats.py").write_text("")
    layout = "app/   the project\n  results/   cells.py, stats.py\n"
    (tmp_path / "README.md").write_text(f"# x\n\n## Layout\n\n```\n{layout}```\n")
    assert layout_mismatches(tmp_path) == ["stats.py is not in app/results/"]
