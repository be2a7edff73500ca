"""Who may import whom: the service and the agent share benchhub_protocol and never import each
other; the shared package imports neither, nor Django, nor anything that talks to a network. Inside
the service, the API and the pages both read the domain (the read model is benchhub.results.board)
and never each other."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# (folder, top-level packages its modules must never import)
RULES = (
    ("benchhub", {"benchhub_agent"}),
    ("agent/benchhub_agent", {"benchhub", "django", "rest_framework"}),
    ("protocol/benchhub_protocol", {"benchhub", "benchhub_agent", "django", "rest_framework", "requests", "urllib3"}),
)

# (folder, a package its modules must never import, itself or any module below it)
SIBLINGS = (("benchhub/web", "benchhub.api"), ("benchhub/api", "benchhub.web"))


def imported_modules(path: Path) -> set[str]:
    """The full name of every module an import statement names, wherever it stands
    (`from benchhub import api` names benchhub.api)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def imported_packages(path: Path) -> set[str]:
    """The top-level package of every import statement in a module, wherever it stands."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


@pytest.mark.parametrize(("folder", "forbidden"), RULES, ids=[folder for folder, _ in RULES])
def test_it_keeps_each_side_to_its_own_imports(folder: str, forbidden: set[str]) -> None:
    modules = sorted((ROOT / folder).rglob("*.py"))
    assert modules, folder
    crossings = [
        f"{path.relative_to(ROOT)} imports {name}"
        for path in modules
        for name in sorted(imported_packages(path) & forbidden)
    ]
    assert crossings == []


def test_it_sees_an_import_inside_a_function(tmp_path: Path) -> None:
    module = tmp_path / "late.py"
    module.write_text("def f():\n    from benchhub_agent.sweep import x\n    import benchhub_agent.tools\n")
    assert imported_packages(module) == {"benchhub_agent"}


@pytest.mark.parametrize(("folder", "forbidden"), SIBLINGS, ids=[folder for folder, _ in SIBLINGS])
def test_the_api_and_the_pages_never_import_each_other(folder: str, forbidden: str) -> None:
    modules = sorted((ROOT / folder).rglob("*.py"))
    assert modules, folder
    crossings = [
        f"{path.relative_to(ROOT)} imports {name}"
        for path in modules
        for name in sorted(imported_modules(path))
        if name == forbidden or name.startswith(forbidden + ".")
    ]
    assert crossings == []


def test_it_sees_a_sibling_imported_by_its_parent(tmp_path: Path) -> None:
    module = tmp_path / "late.py"
    module.write_text("def f():\n    from benchhub import api\n    from benchhub.web.words import plural\n")
    assert {"benchhub.api", "benchhub.web.words"} <= imported_modules(module)
