"""The tool-running half of patches/verify.py: copying trees, applying patches, and the two compilers.

Each check returns (ok, detail). A missing tool is a failed check that names the package to install, never a skip.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

SHIM_DIR = Path(__file__).resolve().parent / "metal_shim"
KERNELS_DIR = "ggml/src/ggml-metal/kernels"
# the sources one Metal library is built from for mul_mv (CMakeLists.txt prepends exactly these headers)
METAL_UNIT = ("common.h", "dequantize.h", "mul_mv.metal")
ATTRIBUTE = re.compile(r"\[\[[^\[\]]*\]\]")
EMULATED_KERNELS = re.compile(r"kernel_mul_mv_ext_(?:iq\w+|q4_K\w+)|kernel_mul_mv_iq\w+_f32(?:_vec)?")
HALF_CALLS_FLAG = "-fallow-half-arguments-and-returns"
CLANG_CANDIDATES = ("clang++", *(f"clang++-{v}" for v in range(20, 13, -1)))
TIMEOUT_S = 300


def copy_tree(src: Path, dst: Path) -> None:
    # the fixture is a vendored submodule: its .git file points at a repository that is not there
    shutil.copytree(src, dst, symlinks=True, ignore=shutil.ignore_patterns(".git"))


def touched_files(patch_text: str) -> list[str]:
    return re.findall(r"^diff --git a/(\S+) b/\S+$", patch_text, re.M)


def run(cmd: list[str], cwd: Path, stdin: str | None = None) -> tuple[int, str]:
    # git must not find a repository above the copied tree and apply the patch there instead
    env = {**os.environ, "GIT_CEILING_DIRECTORIES": str(cwd.parent), "LC_ALL": "C"}
    proc = subprocess.run(cmd, cwd=cwd, input=stdin, capture_output=True, text=True, env=env, timeout=TIMEOUT_S)
    return proc.returncode, (proc.stdout + proc.stderr).strip()


def apply_patch(tree: Path, patch: Path) -> tuple[bool, str]:
    """The patch must be a-/b- format that both `patch -p1` and `git apply` take cleanly, then it is applied."""
    if not patch.is_file():
        return False, f"{patch.name} not found in {patch.parent}"
    text = patch.read_bytes().decode()  # read_text() would turn CRLF into LF and hide it
    if "\r" in text or not re.search(r"^--- a/", text, re.M) or not re.search(r"^\+\+\+ b/", text, re.M):
        return False, f"{patch.name} is not an LF, a/ b/ prefixed unified diff"
    for tool, package in (("patch", "patch"), ("git", "git")):
        if shutil.which(tool) is None:
            return False, f"`{tool}` not found: apt-get install {package}"
    rc, out = run(["patch", "-p1", "--dry-run", "--forward", "--batch", "--fuzz=0", "--quiet"], tree, stdin=text)
    if rc != 0:
        return False, f"patch -p1 rejects {patch.name}: {out[-600:]}"
    rc, out = run(["git", "apply", "--check", "--whitespace=nowarn", str(patch)], tree)
    if rc != 0:
        return False, f"git apply --check rejects {patch.name}: {out[-600:]}"
    rc, out = run(["git", "apply", "--whitespace=nowarn", str(patch)], tree)
    if rc != 0:
        return False, f"git apply failed on {patch.name}: {out[-600:]}"
    return True, f"{patch.name} applies with patch -p1 and git apply ({len(touched_files(text))} files)"


def find_clang() -> str | None:
    override = os.environ.get("BENCHHUB_CLANGXX")
    if override:
        return override
    return next((c for c in CLANG_CANDIDATES if shutil.which(c)), None)


def write_metal_unit(tree: Path, unit: Path) -> None:
    """The kernel sources of mul_mv's Metal library, with [[...]] attributes stripped: they carry Metal semantics
    only, and `threadgroup` inside [[threadgroup(0)]] is an erased address-space macro here."""
    shutil.rmtree(unit, ignore_errors=True)
    unit.mkdir()
    for name in METAL_UNIT:
        (unit / name).write_text(ATTRIBUTE.sub("", (tree / KERNELS_DIR / name).read_text()))


def include_flags(tree: Path, unit: Path) -> list[str]:
    return ["-include", "metal_stdlib", "-I", str(unit), "-I", str(SHIM_DIR),
            "-I", str(tree / "ggml/src/ggml-metal"), "-I", str(tree / "ggml/src")]  # fmt: skip


def metal_syntax(tree: Path) -> tuple[bool, str]:
    """clang in C++ mode over mul_mv.metal and its headers, against the <metal_stdlib> stand-in in metal_shim/.

    The explicit template instantiations make clang instantiate every kernel the library exports, so a
    dequantizer whose block type or signature does not fit, a wrong arity, an undeclared name or a bad
    conversion fails here as it would in Apple's compiler.
    """
    clang = find_clang()
    if clang is None:
        return False, "clang++ not found: apt-get install clang (or set BENCHHUB_CLANGXX)"
    unit = tree.parent / f".{tree.name}-metal-unit"
    try:
        write_metal_unit(tree, unit)
        cmd = [
            clang, "-x", "c++", "-std=c++20", "-target", "aarch64-linux-gnu", "-ffreestanding", "-nostdinc",
            "-nostdinc++", "-fsyntax-only", "-ferror-limit=20", "-Wno-everything", *include_flags(tree, unit),
            str(unit / "mul_mv.metal"),
        ]  # fmt: skip
        rc, out = run(cmd, unit)
    finally:
        shutil.rmtree(unit, ignore_errors=True)
    if rc != 0:
        return False, f"mul_mv.metal does not type-check: {out[:1500]}"
    return True, "mul_mv.metal with common.h and dequantize.h type-checks, every explicit instantiation instantiated"


def kernel_registry(source: str) -> str:
    """C++ table from host_name to the function Metal would export under it, for the kernels emulate.cpp runs."""
    entities = re.findall(r'template \[\[host_name\("(\w+)"\)\]\]\s+kernel\s+\w+\s+(\w+\s*<[^;]*>);', source)
    entities += re.findall(r'\[\[host_name\("(\w+)"\)\]\]\s*kernel\s+void\s+(\w+)\s*\(', source)
    rows = "".join(
        f'    {{"{name}", reinterpret_cast<void (*)()>(&{entity})}},\n'
        for name, entity in entities
        if EMULATED_KERNELS.fullmatch(name)
    )
    return f"const metal_emu_entry metal_emu_registry[] = {{\n{rows}}};\n"


def metal_run(tree: Path, with_vec: bool) -> tuple[bool, str]:
    """Build metal_shim/emulate.cpp against the tree's kernels and run it: every i-quant mv-ext kernel (and Q4_K's,
    as a control) at ne11 2..8, and the scalar (and, with_vec, the vector) batch-1 kernels, against a
    double-precision reference."""
    clang = find_clang()
    if clang is None:
        return False, "clang++ not found: apt-get install clang (or set BENCHHUB_CLANGXX)"
    unit = tree.parent / f".{tree.name}-metal-run"
    try:
        write_metal_unit(tree, unit)
        (unit / "registry.inc").write_text(kernel_registry((tree / KERNELS_DIR / "mul_mv.metal").read_text()))
        suffix = "_vec" if with_vec else "-"
        cmd = [
            clang, "-std=c++20", "-O0", "-pthread", "-w", "-DMETAL_SHIM_RUN", f'-DMETAL_EMU_VEC_SUFFIX="{suffix}"',
            "-ferror-limit=20", *include_flags(tree, unit), str(SHIM_DIR / "emulate.cpp"), "-o", str(unit / "emulate"),
        ]  # fmt: skip
        # x86 has no half arithmetic type: __fp16 stands in, which clang 14 lets through calls only with this
        # flag; newer clang allows it by default and no longer knows the flag
        rc, out = run([*cmd[:1], "-Xclang", HALF_CALLS_FLAG, *cmd[1:]], unit)
        if rc != 0 and HALF_CALLS_FLAG in out:
            rc, out = run(cmd, unit)
        if rc != 0:
            return False, f"emulate.cpp does not build against this tree: {out[:1500]}"
        rc, out = run([str(unit / "emulate")], unit)
    finally:
        shutil.rmtree(unit, ignore_errors=True)
    summary = out.splitlines()[-1] if out else "no output"
    if rc != 0:
        return False, f"{summary}: {out[:1500]}"
    return True, f"{summary} (emulated on the CPU, each kernel against a double-precision reference)"


def host_syntax(tree: Path, cpp_files: list[str], outside_metal: list[str]) -> tuple[bool, str]:
    """What the CPU build sees of the patch: it compiles no ggml-metal source (those are built only with
    GGML_METAL=ON), so the patch must stay inside ggml/src/ggml-metal, and its C++ host files must still
    compile; that part is checked with a full -fsyntax-only pass (parsing, types, template instantiation)."""
    if outside_metal:
        return False, f"touches files the CPU build compiles: {', '.join(outside_metal)}"
    compiler = shutil.which("g++") or find_clang()
    if compiler is None:
        return False, "no C++ compiler found: apt-get install g++"
    includes = ["-I", "ggml/include", "-I", "ggml/src", "-I", "ggml/src/ggml-metal"]
    for rel in cpp_files:
        rc, out = run([compiler, "-std=c++17", "-fsyntax-only", "-w", *includes, rel], tree)
        if rc != 0:
            return False, f"{rel} does not compile: {out[:1500]}"
    files = ", ".join(Path(f).name for f in cpp_files) or "no host files"
    return True, f"only ggml-metal files touched; {files} pass {Path(compiler).name} -fsyntax-only"
