#!/usr/bin/env python3
"""Verifier for the mv-ext-iquants patches (01-mv-ext-iquants.patch, 02-vectorized-bs1.patch), without a Mac.

Metal kernels are compiled only at run time on a Mac, so a misnamed or mistyped instantiation would otherwise reach
contributors. This runs anywhere: it applies the patches in campaign order to the pristine llama.cpp tree at the
pinned commit, checks what the host code will ask the Metal library for against what the kernels provide,
type-checks the kernels with clang, and runs the ones the patches add on the CPU (patches/README.md lists the checks).

Usage: python patches/verify.py [--tree PRISTINE_TREE] [--json]
Exit codes: 0 every check passed, 1 a check failed, 2 the pristine tree is missing (run `make fixtures`).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass
from pathlib import Path

PATCHES_DIR = Path(__file__).resolve().parent
sys.path.insert(0, str(PATCHES_DIR))

from verify_tools import apply_patch, copy_tree, host_syntax, metal_run, metal_syntax, touched_files  # noqa: E402

CAMPAIGN_FILE = PATCHES_DIR.parent / "protocol" / "benchhub_protocol" / "campaigns" / "mv-ext-iquants" / "v1.json"
PRISTINE_DIRNAME = "llama.cpp-0c1e570"
METAL_DIR = "ggml/src/ggml-metal"
MUL_MV = f"{METAL_DIR}/kernels/mul_mv.metal"
DEQUANTIZE = f"{METAL_DIR}/kernels/dequantize.h"
OPS = f"{METAL_DIR}/ggml-metal-ops.cpp"
DEVICE = f"{METAL_DIR}/ggml-metal-device.cpp"
IQUANTS = ("IQ2_XXS", "IQ2_XS", "IQ2_S", "IQ3_XXS", "IQ3_S", "IQ1_S", "IQ1_M", "IQ4_XS")
REFERENCE_KQUANT = "Q4_K"  # patch 01 admits the i-quants wherever the K-quants are admitted
FLOAT_CHUNK_TYPES = {"f32": "float4", "f16": "half4", "bf16": "bfloat4"}  # unquantized rows are read 4 at a time
DISP_CHUNK = {"type4x4": 16, "type4": 4}  # elements one dequantizer call returns

EXIT_OK, EXIT_FAILED, EXIT_NO_TREE = 0, 1, 2


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str


@dataclass(frozen=True)
class Instantiation:
    typedef: str
    disp: str
    r1: int
    block: str
    epb: int
    dequantizer: str


class MissingTree(Exception):
    pass


def default_pristine_tree() -> Path:
    fixtures = Path(os.environ.get("BENCHHUB_FIXTURES", "~/.cache/benchhub-fixtures")).expanduser()
    return fixtures / PRISTINE_DIRNAME


def campaign() -> tuple[list[str], set[str]]:
    """The patch files in the order the campaign applies them, and the variables its vector variant sets."""
    variants = json.loads(CAMPAIGN_FILE.read_text())["variants"]
    widest = max(variants, key=lambda v: len(v["patches"]))
    return [patch["name"] for patch in widest["patches"]], set(widest["env"])


def read(tree: Path, rel: str) -> str:
    return (tree / rel).read_text()


def function_body(source: str, signature_start: str) -> str:
    start = source.index(signature_start)
    return source[start : source.index("\n}\n", start)]


# ---------------------------------------------------------------- facts read from a tree


def ggml_types(tree: Path) -> dict[str, tuple[str, int]]:
    """GGML_TYPE_<ENUM> suffix -> (ggml_type_name(), block size), from the type_traits table in ggml.c."""
    defines: dict[str, str] = dict(re.findall(r"#define (QK\w*)\s+(\d+)", read(tree, "ggml/src/ggml-common.h")))
    types = {}
    for enum, body in re.findall(r"\[GGML_TYPE_(\w+)\]\s*=\s*\{(.*?)\n\s*\},", read(tree, "ggml/src/ggml.c"), re.S):
        name = re.search(r'\.type_name\s*=\s*"(\w+)"', body)
        size = re.search(r"\.blck_size\s*=\s*(\w+)", body)
        if name and size:
            block_size = size.group(1)
            types[enum] = (name.group(1), int(defines.get(block_size, block_size)))
    return types


def mv_ext_admission(tree: Path) -> dict[str, set[int]]:
    """src0 type -> the ne11 values for which ggml_metal_op_mul_mat takes the mv-ext path."""
    body = function_body(read(tree, OPS), "int ggml_metal_op_mul_mat(")
    gate = body[body.index("op->src[1]->type == GGML_TYPE_F32") : body.index("{", body.index("ne11 <= "))]
    admitted: dict[str, set[int]] = {}
    type_test = r"op->src\[0\]->type == GGML_TYPE_\w+\s*\|\|\s*(?://[^\n]*\s*)?"
    group_re = rf"\(\s*((?:{type_test})+)false\) && \(ne11 >= (\d+) && ne11 <= (\d+)\)"
    for group, lo, hi in re.findall(group_re, gate):
        for enum in re.findall(r"GGML_TYPE_(\w+)", group):
            admitted.setdefault(enum, set()).update(range(int(lo), int(hi) + 1))
    return admitted


def mv_ext_r1(tree: Path) -> dict[int, int]:
    """ne11 -> r1ptg, from the switch that picks the kernel's rows per threadgroup."""
    body = function_body(read(tree, OPS), "int ggml_metal_op_mul_mat(")
    switch = body[body.index("switch (ne11)") : body.index("default:", body.index("switch (ne11)"))]
    r1: dict[int, int] = {}
    pending: list[int] = []
    for case, value in re.findall(r"case (\d+):|r1ptg = (\d+);", switch):
        if case:
            pending.append(int(case))
        else:
            r1.update(dict.fromkeys(pending, int(value)))
            pending = []
    return r1


def kernel_name_format(tree: Path, getter: str) -> str:
    body = function_body(read(tree, DEVICE), f"ggml_metal_pipeline_with_params {getter}(")
    found = re.search(r'snprintf\(base, 256, "([^"]+)"', body)
    if found is None:
        raise ValueError(f"{getter} no longer builds its kernel name with snprintf(base, ...)")
    return found.group(1)


def host_names(tree: Path) -> list[str]:
    return re.findall(r'\[\[host_name\("(\w+)"\)\]\]', read(tree, MUL_MV))


def mv_ext_instantiations(tree: Path) -> dict[str, Instantiation]:
    source = read(tree, MUL_MV)
    pattern = (r'template \[\[host_name\("(kernel_mul_mv_ext_\w+)"\)\]\]\s+kernel\s+(\w+)\s+(\w+)\s*'
               r"<\s*(\d+),\s*(\w+),\s*(\d+),\s*(\w+)\s*>;")  # fmt: skip
    return {
        name: Instantiation(typedef, disp, int(r1), block, int(epb), deq)
        for name, typedef, disp, r1, block, epb, deq in re.findall(pattern, source)
    }


def disp_typedefs(tree: Path) -> dict[str, str]:
    return {
        alias: disp for disp, alias in re.findall(r"typedef decltype\((\w+)\s*<[^>]*>\)\s*(\w+);", read(tree, MUL_MV))
    }


def dequantizers(tree: Path) -> dict[str, tuple[str, str]]:
    """dequantize_* -> (the block type it reads, type4 or type4x4)."""
    pattern = (
        r"template <typename (type4x4|type4)>\s*"
        r"void (dequantize_\w+)\(device const (\w+) \*\s*\w+, short il, thread \1 & reg\)"
    )
    return {name: (block, family) for family, name, block in re.findall(pattern, read(tree, DEQUANTIZE))}


# ---------------------------------------------------------------- checks


def check_mv_ext_kernels(tree: Path, stage: str) -> Check:
    """Every (admitted type, reachable r1) has an instantiation the pipeline lookup will find, with the right parts;
    instantiations no admission reaches yet (01's r1 = 2) must be just as well-formed."""
    types, admission, r1_of = ggml_types(tree), mv_ext_admission(tree), mv_ext_r1(tree)
    fmt = kernel_name_format(tree, "ggml_metal_library_get_pipeline_mul_mv_ext")
    insts, typedefs, deqs = mv_ext_instantiations(tree), disp_typedefs(tree), dequantizers(tree)
    names = host_names(tree)
    problems = [f"{n} instantiated twice" for n in sorted({n for n in names if names.count(n) > 1})]
    reachable = {(enum, r1) for enum, ne11s in admission.items() for r1 in {r1_of[n] for n in ne11s}}
    for enum, r1 in sorted(reachable):
        name = fmt % (types[enum][0], "f32", r1)
        if name not in insts:
            problems.append(f"{name} missing: GGML_TYPE_{enum} is admitted at ne11 {sorted(admission[enum])}")
    by_name = {fmt % (tn, "f32", r1): (tn, size, r1) for tn, size in types.values() for r1 in set(r1_of.values())}
    for name, inst in sorted(insts.items()):
        if name not in by_name:
            problems.append(f"{name} is not a name the pipeline lookup builds")
            continue
        type_name, block_size, r1 = by_name[name]
        problems += instantiation_problems(name, inst, type_name, block_size, typedefs, deqs, r1)
    detail = f"{len(reachable)} reachable (type, r1) pairs and all {len(insts)} mv-ext instantiations well-formed"
    return Check(f"mv-ext-kernels[{stage}]", not problems, "; ".join(problems) or detail)


def instantiation_problems(
    name: str,
    inst: Instantiation,
    type_name: str,
    block_size: int,
    typedefs: dict[str, str],
    deqs: dict[str, tuple[str, str]],
    r1: int,
) -> list[str]:
    problems = []
    block = FLOAT_CHUNK_TYPES.get(type_name, f"block_{type_name}")
    epb = 4 if type_name in FLOAT_CHUNK_TYPES else block_size
    if inst.r1 != r1:
        problems.append(f"{name} instantiates r1={inst.r1}")
    if inst.block != block:
        problems.append(f"{name} reads {inst.block}, expected {block}")
    if inst.epb != epb:
        problems.append(f"{name} declares {inst.epb} elements per block, {block} holds {epb}")
    if typedefs.get(inst.typedef) != inst.disp:
        problems.append(f"{name} uses typedef {inst.typedef}, which is not the type of {inst.disp}")
    if inst.dequantizer not in (f"dequantize_{type_name}", f"dequantize_{type_name}_t4"):
        problems.append(f"{name} dequantizes with {inst.dequantizer}, not dequantize_{type_name}[_t4]")
    deq = deqs.get(inst.dequantizer)
    if deq is None:
        problems.append(f"{name}: {inst.dequantizer} is not defined in dequantize.h")
        return problems
    family = "type4x4" if "q4x4" in inst.disp else "type4"
    if deq != (inst.block, family):
        problems.append(
            f"{name}: {inst.dequantizer} takes ({deq[0]}, {deq[1]}), {inst.disp} needs ({inst.block}, {family})"
        )
    if inst.epb % DISP_CHUNK[family]:
        problems.append(f"{name}: {inst.epb} elements per block is not a whole number of {family} chunks")
    return problems


def check_admission(pristine: Path, tree: Path, stage: str) -> Check:
    """Only the i-quants change, and exactly to the batch range this stage promises."""
    before, after = mv_ext_admission(pristine), mv_ext_admission(tree)
    problems = [
        f"GGML_TYPE_{t}: {sorted(before.get(t, ()))} -> {sorted(after.get(t, ()))}"
        for t in sorted(set(before) | set(after))
        if t not in IQUANTS and before.get(t) != after.get(t)
    ]
    kquant = after[REFERENCE_KQUANT]
    expected = kquant if stage == "01" else kquant | {2, 3}
    problems += [f"GGML_TYPE_{t} admitted at {sorted(after.get(t, ()))}, expected {sorted(expected)}"
                 for t in IQUANTS if after.get(t) != expected]  # fmt: skip
    if mv_ext_r1(tree) != mv_ext_r1(pristine):
        problems.append("the ne11 -> r1ptg switch changed")
    ok_detail = f"i-quants at ne11 {min(expected)}..{max(expected)}, every other type as upstream"
    return Check(f"admission[{stage}]", not problems, "; ".join(problems) or ok_detail)


GUARD = re.compile(
    r'static const bool (\w+) = ggml_metal_env_flag_on\("(\w+)"\);\s*if \(\1\) \{\s*suffix = "_vec";\s*\}'
)


def check_vec_gating(before: Path, after: Path, campaign_env: set[str]) -> Check:
    """Every kernel 02 adds is a vector variant that the host asks for only when its own variable is "1"."""
    types = {enum: name for enum, (name, _) in ggml_types(after).items()}
    fmt = kernel_name_format(after, "ggml_metal_library_get_pipeline_mul_mv")
    old, new = set(host_names(before)), set(host_names(after))
    problems = [f"02 removes kernel {n}" for n in sorted(old - new)]
    body = function_body(read(after, DEVICE), "ggml_metal_pipeline_with_params ggml_metal_library_get_pipeline_mul_mv(")
    gated: dict[str, str] = {}
    for enum, block in re.findall(r"case GGML_TYPE_(\w+):(.*?)(?=case GGML_TYPE_|default:)", body, re.S):
        guards = GUARD.findall(block)
        if block.count('"_vec"') != len(guards):
            problems.append(f"GGML_TYPE_{enum}: a _vec suffix is chosen outside the environment guard")
        for _, var in guards:
            if var != f"GGML_METAL_MV_{enum}_VEC":
                problems.append(f"GGML_TYPE_{enum} is switched by {var}")
            gated[enum] = var
    for name in sorted(new - old):
        enum = next((e for e in gated if fmt % (types[e], "f32", "_vec") == name), None)
        if enum is None:
            problems.append(f"{name} is added but no environment guard selects it")
    for enum in sorted(gated):
        if fmt % (types[enum], "f32", "") not in new:
            problems.append(f"GGML_TYPE_{enum} lost its scalar default kernel")
        if fmt % (types[enum], "f32", "_vec") not in new:
            problems.append(
                f"GGML_TYPE_{enum} is switched to {fmt % (types[enum], 'f32', '_vec')}, which does not exist"
            )
    vec_literals = [sum(f.read_text().count('"_vec"') for f in host_sources(tree)) for tree in (before, after)]
    if vec_literals[1] - vec_literals[0] != len(gated):
        problems.append('"_vec" appears in host code outside the per-type guards')
    flag = function_body(read(after, DEVICE), "static bool ggml_metal_env_flag_on(")
    if "getenv(name)" not in flag or 'strcmp(val, "1") == 0' not in flag:
        problems.append('ggml_metal_env_flag_on does not mean exactly "1"')
    if set(gated.values()) != campaign_env:
        problems.append(f"guards read {sorted(gated.values())}, the campaign sets {sorted(campaign_env)}")
    detail = f"{len(new - old)} vector kernels, each behind its variable: {', '.join(sorted(gated.values()))}"
    return Check("vec-gating[01+02]", not problems, "; ".join(problems) or detail)


def host_sources(tree: Path) -> Iterable[Path]:
    return sorted(p for p in (tree / METAL_DIR).iterdir() if p.suffix in (".cpp", ".m", ".h"))


def check_added_kernels(before: Path, after: Path) -> Check:
    """Patch 01 adds exactly the 32 mv-ext kernels r1 = 2..5 for the eight i-quants, nothing else."""
    types = ggml_types(after)
    fmt = kernel_name_format(after, "ggml_metal_library_get_pipeline_mul_mv_ext")
    expected = {fmt % (types[t][0], "f32", r1) for t in IQUANTS for r1 in range(2, 6)}
    added, removed = set(host_names(after)) - set(host_names(before)), set(host_names(before)) - set(host_names(after))
    problems = [f"missing {n}" for n in sorted(expected - added)] + [
        f"unexpected {n}" for n in sorted(added - expected)
    ]
    problems += [f"removed {n}" for n in sorted(removed)]
    return Check(
        "added-kernels[01]", not problems, "; ".join(problems) or f"exactly the {len(expected)} i-quant kernels"
    )


def check_sign_table(tree: Path) -> Check:
    """kiq_sign4[n] must be -1 in lane k exactly when bit k of n is set, like kmask_iq2xs in the scalar kernels."""
    match = re.search(r"constant float4 kiq_sign4\[16\] = \{(.*?)\};", read(tree, MUL_MV), re.S)
    if match is None:
        return Check("sign-table[01+02]", False, "kiq_sign4 not found in mul_mv.metal")
    rows = [
        [float(x.rstrip("f")) for x in re.findall(r"-?\d+\.?\d*f?", r)]
        for r in re.findall(r"\{([^{}]*)\}", match.group(1))
    ]
    expected = [[-1.0 if (n >> k) & 1 else 1.0 for k in range(4)] for n in range(16)]
    bad = [n for n in range(16) if n >= len(rows) or rows[n] != expected[n]]
    return Check(
        "sign-table[01+02]", not bad and len(rows) == 16, f"wrong rows {bad}" if bad else "16 rows match the bits"
    )


# ---------------------------------------------------------------- driver


def guarded(name: str, check: Callable[..., Check], *args: object) -> Check:
    """A construct the parser relies on that upstream has moved is a failed check that says so, not a traceback."""
    try:
        return check(*args)
    except (ValueError, KeyError, IndexError, OSError) as exc:
        return Check(name, False, f"could not read the tree: {exc!r}")


def stage_checks(pristine: Path, before: Path, tree: Path, stage: str, campaign_env: set[str]) -> list[Check]:
    checks = [
        Check(f"metal-syntax[{stage}]", *metal_syntax(tree)),
        Check(f"metal-run[{stage}]", *metal_run(tree, with_vec=stage == "01+02")),
        guarded(f"mv-ext-kernels[{stage}]", check_mv_ext_kernels, tree, stage),
        guarded(f"admission[{stage}]", check_admission, pristine, tree, stage),
    ]
    if stage == "01":
        checks.append(guarded("added-kernels[01]", check_added_kernels, before, tree))
    elif stage == "01+02":
        checks.append(guarded("vec-gating[01+02]", check_vec_gating, before, tree, campaign_env))
        checks.append(guarded("sign-table[01+02]", check_sign_table, tree))
    return checks


def verify(pristine: Path) -> list[Check]:
    if not (pristine / MUL_MV).is_file():
        raise MissingTree(f"pristine llama.cpp tree not found at {pristine}: run `make fixtures`")
    patch_names, campaign_env = campaign()
    checks = [Check("metal-syntax[upstream]", *metal_syntax(pristine))]
    with tempfile.TemporaryDirectory(prefix="benchhub-verify-") as tmp:
        before = pristine
        for index, patch_name in enumerate(patch_names):
            stage = "+".join(p.split("-")[0] for p in patch_names[: index + 1])
            tree = Path(tmp) / stage
            copy_tree(before, tree)
            patch = PATCHES_DIR / patch_name
            applied = apply_patch(tree, patch)
            checks.append(Check(f"apply[{stage}]", *applied))
            if not applied[0]:
                break
            files = touched_files(patch.read_text())
            cpp_files = [f for f in files if f.endswith(".cpp")]
            outside = [f for f in files if not f.startswith(f"{METAL_DIR}/")]
            checks.append(Check(f"cpu-build[{stage}]", *host_syntax(tree, cpp_files, outside)))
            checks += stage_checks(pristine, before, tree, stage, campaign_env)
            before = tree
    return checks


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tree", type=Path, default=None, help="pristine llama.cpp tree at the pinned commit")
    parser.add_argument("--json", action="store_true", help="print the checks as a JSON list")
    args = parser.parse_args(argv)
    try:
        checks = verify(args.tree or default_pristine_tree())
    except MissingTree as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_NO_TREE
    if args.json:
        print(json.dumps([asdict(c) for c in checks], indent=2))
    else:
        for c in checks:
            print(f"{'PASS' if c.ok else 'FAIL'} {c.name}: {c.detail}")
        print(f"{sum(c.ok for c in checks)} passed, {sum(not c.ok for c in checks)} failed")
    return EXIT_OK if all(c.ok for c in checks) else EXIT_FAILED


if __name__ == "__main__":
    sys.exit(main())
