"""Crafted patches against the working tree (issue 31): nothing outside the tree is written or deleted,
whatever a patch names, and the tree comes back exactly (types, modes, renames) after each variant.

The tree lives where a real run keeps it (cache/build/<config>/src under the agent's home); the agent's own
signing key and a decoy key file above the home must survive every patch. Against the agent before
issue 31: a refused `../` patch made the cleanup delete the key, a patch turning a file into a symlink
made the restore overwrite the link's target, and a renamed or chmodded file stayed broken.
"""

from __future__ import annotations

import hashlib
import os
import stat
from pathlib import Path

import pytest
from benchhub_agent import keys, worktree
from benchhub_agent.campaign import Patch
from benchhub_agent.dirs import home
from benchhub_agent.errors import AgentError, ExitCode

PRISTINE_FILES = {"CMakeLists.txt": "project(x)\n", "src/a.c": "int a;\n", "src/b.c": "int b;\n"}


def tree_state(root: Path) -> dict[str, tuple[str, int, str]]:
    """Every path under root: its type, its executable bit and its content or link target (lstat only)."""
    found = {}
    for path in sorted(root.rglob("*")):
        info = path.lstat()
        if stat.S_ISLNK(info.st_mode):
            found[str(path.relative_to(root))] = ("link", 0, os.readlink(path))
        elif stat.S_ISDIR(info.st_mode):
            found[str(path.relative_to(root))] = ("dir", 0, "")
        else:
            found[str(path.relative_to(root))] = ("file", info.st_mode & 0o111, path.read_text())
    return found


@pytest.fixture
def setup(tmp_path: Path) -> tuple[worktree.WorkTree, Path, Path]:
    """(the working tree, ensured; the agent's signing key; a decoy key above the agent's home)."""
    pristine = tmp_path / "pristine"
    for relative, text in PRISTINE_FILES.items():
        (pristine / relative).parent.mkdir(parents=True, exist_ok=True)
        (pristine / relative).write_text(text)
    dirs = home()
    keys.load_or_create(dirs)
    decoy = tmp_path / "decoy-key"
    decoy.write_text("the decoy's secret\n")
    tree = worktree.WorkTree(pristine, dirs.builds / "cpu-0123" / "src", dirs.sources / "trees.git")
    tree.ensure()
    return tree, keys.key_path(dirs), decoy


def patch_file(tmp_path: Path, text: str, name: str = "hostile.patch") -> Patch:
    path = tmp_path / name
    path.write_text(text)
    return Patch(name, hashlib.sha256(text.encode()).hexdigest(), path)


def new_file(relative: str) -> str:
    header = f"diff --git a/{relative} b/{relative}\nnew file mode 100644\n"
    return header + f"--- /dev/null\n+++ b/{relative}\n@@ -0,0 +1 @@\n+pwned\n"


def deleted(relative: str, text: str) -> str:
    return (
        f"diff --git a/{relative} b/{relative}\ndeleted file mode 100644\n--- a/{relative}\n+++ /dev/null\n"
        f"@@ -1 +0,0 @@\n-{text}"
    )


def hostile_patches(tree: Path, target: Path) -> dict[str, list[str]]:
    """Patches aimed at `target`, a file outside the tree: each case is one or more patches in order."""
    climb = os.path.relpath(target, tree)
    text = target.read_text()
    folder = str(target.parent)
    hidden = climb.replace("..", "\\056\\056")  # git reads "\056\056/x" as "../x"
    return {
        "creates a file above the tree": [new_file(climb)],
        "deletes a file above the tree": [deleted(climb, text)],
        "names an absolute path": [
            new_file(str(target).lstrip("/")).replace("b/" + str(target).lstrip("/"), "b/" + str(target))
        ],
        "hides its '..' in a quoted path": [new_file(climb).replace(f"b/{climb}\n", f'"b/{hidden}"\n')],
        "renames a file out of the tree": [
            f"diff --git a/src/a.c b/{climb}\nsimilarity index 100%\nrename from src/a.c\nrename to {climb}\n"
        ],
        "turns a file into a link to the target": [
            deleted("src/a.c", "int a;\n")
            + "diff --git a/src/a.c b/src/a.c\nnew file mode 120000\n--- /dev/null\n+++ b/src/a.c\n"
            f"@@ -0,0 +1 @@\n+{target}\n\\ No newline at end of file\n"
        ],
        "makes a link out, then writes through it": [
            "diff --git a/escape b/escape\nnew file mode 120000\n--- /dev/null\n+++ b/escape\n"
            f"@@ -0,0 +1 @@\n+{folder}\n\\ No newline at end of file\n",
            deleted(f"escape/{target.name}", text),
        ],
    }


CASES = [
    "creates a file above the tree",
    "deletes a file above the tree",
    "names an absolute path",
    "hides its '..' in a quoted path",
    "renames a file out of the tree",
    "turns a file into a link to the target",
    "makes a link out, then writes through it",
]


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("aim", ["signing key", "decoy"])
def test_no_patch_writes_or_deletes_outside_the_tree(
    case: str, aim: str, setup: tuple[worktree.WorkTree, Path, Path], tmp_path: Path
) -> None:
    tree, key, decoy = setup
    target = key if aim == "signing key" else decoy
    before = {path: path.read_bytes() for path in (key, decoy)}
    pristine = tree_state(tree.path)
    texts = hostile_patches(tree.path, target)[case]
    patches = [patch_file(tmp_path, text, f"{index}.patch") for index, text in enumerate(texts)]
    refusal = None
    try:
        tree.apply(patches)
    except AgentError as error:
        refusal = error
    tree.restore()
    assert {path: path.read_bytes() for path in (key, decoy) if path.is_file()} == before  # nothing deleted or written
    assert tree_state(tree.path) == pristine
    assert refusal is not None and refusal.code == ExitCode.SOURCE
    assert "refused" in refusal.message, refusal.message  # by the agent's check, before git apply wrote anything


RENAME = "diff --git a/src/a.c b/src/c.c\nsimilarity index 100%\nrename from src/a.c\nrename to src/c.c\n"
CHMOD = "diff --git a/src/b.c b/src/b.c\nold mode 100644\nnew mode 100755\n"
FILE_TO_FOLDER = deleted("src/a.c", "int a;\n") + new_file("src/a.c/x.c")


@pytest.mark.parametrize(("name", "text"), [("rename", RENAME), ("chmod", CHMOD), ("file to folder", FILE_TO_FOLDER)])
def test_each_variant_starts_from_the_exact_pristine_tree(
    name: str, text: str, setup: tuple[worktree.WorkTree, Path, Path], tmp_path: Path
) -> None:
    tree = setup[0]
    pristine = tree_state(tree.path)
    tree.apply([patch_file(tmp_path, text)])
    assert tree_state(tree.path) != pristine  # the patch did apply
    tree.apply([])  # the next variant: no patches
    assert tree_state(tree.path) == pristine


def test_a_restore_rewrites_only_what_a_patch_changed(
    setup: tuple[worktree.WorkTree, Path, Path], tmp_path: Path
) -> None:
    """make must see the patched file as changed and leave the others alone."""
    tree = setup[0]
    edit = "diff --git a/src/a.c b/src/a.c\n--- a/src/a.c\n+++ b/src/a.c\n@@ -1 +1 @@\n-int a;\n+int a = 2;\n"
    untouched, patched = tree.path / "src" / "b.c", tree.path / "src" / "a.c"
    mtimes = untouched.stat().st_mtime_ns, patched.stat().st_mtime_ns
    tree.apply([patch_file(tmp_path, edit)])
    tree.restore()
    assert patched.read_text() == "int a;\n" and patched.stat().st_mtime_ns > mtimes[1]
    assert untouched.stat().st_mtime_ns == mtimes[0]


def test_a_trusted_campaign_whose_patch_climbs_out_is_refused_end_to_end(tmp_path: Path, isolated_home: Path) -> None:
    """Issue 31's report as it happened: a server's patch naming `../` paths, trusted with its digest, the
    source a --llama-src tree. The working tree is cache/build/<config>/src, four levels under the home."""
    from benchhub_agent.cli import main
    from click.testing import CliRunner

    from tests.agent.loopback import running
    from tests.agent.test_hostile_server import GEMMA

    keys.load_or_create(home())
    key = keys.key_path(home())
    decoy = tmp_path / "decoy-key"
    decoy.write_text("the decoy's secret\n")
    before = {path: path.read_bytes() for path in (key, decoy)}
    tiny = tmp_path / "tiny-src"
    tiny.mkdir()
    (tiny / "CMakeLists.txt").write_text("cmake_minimum_required(VERSION 3.14)\nproject(tiny NONE)\n")
    text = "".join(
        deleted(f"../../../../{path.relative_to(isolated_home)}" if path == key else "../../../../../decoy-key", "x\n")
        for path in (key, decoy)
    )
    with running() as hostile:
        hostile.add_patch(0, "climbs.patch", text.encode())  # on the baseline, which is built first
        hostile.sign()  # signed by the campaign key, and trusted by the user: the patch's own check still holds
        args = ["run", str(GEMMA), "--server", hostile.url, "--no-upload", "--backend", "cpu", "--llama-src", str(tiny)]
        listed = CliRunner().invoke(main, args)
        assert listed.exit_code == ExitCode.UNTRUSTED, listed.output
        digest = listed.output.split("manifest digest: ")[1].split()[0]
        answer = CliRunner().invoke(main, [*args, "--trust-campaign", digest, "--yes"])
    assert {path: path.read_bytes() for path in (key, decoy) if path.is_file()} == before
    assert answer.exit_code == ExitCode.SOURCE and "climbs.patch" in answer.output and "refused" in answer.output
