"""The patches and their verifier, on the real pristine llama.cpp tree at the pinned commit.

Each mutation test breaks one thing in a patched tree (or in a patch) the way a typo would, and asserts that the
verifier's check for it fails with a message naming it; the untouched patches must pass every check.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

PATCHES_DIR = Path(__file__).resolve().parents[2] / "patches"
sys.path.insert(0, str(PATCHES_DIR))

import verify  # noqa: E402
import verify_tools  # noqa: E402

EXPECTED_CHECKS = [
    "metal-syntax[upstream]",
    "apply[01]",
    "cpu-build[01]",
    "metal-syntax[01]",
    "metal-run[01]",
    "mv-ext-kernels[01]",
    "admission[01]",
    "added-kernels[01]",
    "apply[01+02]",
    "cpu-build[01+02]",
    "metal-syntax[01+02]",
    "metal-run[01+02]",
    "mv-ext-kernels[01+02]",
    "admission[01+02]",
    "vec-gating[01+02]",
    "sign-table[01+02]",
]
PATCH_01, PATCH_02 = PATCHES_DIR / "01-mv-ext-iquants.patch", PATCHES_DIR / "02-vectorized-bs1.patch"
VEC_ENV = {
    "GGML_METAL_MV_IQ2_XXS_VEC",
    "GGML_METAL_MV_IQ2_XS_VEC",
    "GGML_METAL_MV_IQ2_S_VEC",
    "GGML_METAL_MV_IQ3_XXS_VEC",
}


def locate_pristine() -> Path:
    """$BENCHHUB_FIXTURES' pristine tree; missing, it fails the run (a skip would read as a pass)."""
    tree = verify.default_pristine_tree()
    if not (tree / verify.MUL_MV).is_file():
        pytest.fail(f"pristine llama.cpp tree missing at {tree}: run `make fixtures`")
    return tree


@pytest.fixture(scope="module")
def pristine() -> Path:
    return locate_pristine()


@pytest.fixture(scope="module")
def stages(pristine: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The ggml/ part of the pinned tree after 01 and after 01+02 (all the checks read)."""
    root = tmp_path_factory.mktemp("stages")
    trees = {}
    before = pristine
    for stage, patch in (("01", PATCH_01), ("01+02", PATCH_02)):
        tree = root / stage
        shutil.copytree(before / "ggml", tree / "ggml")
        assert verify_tools.apply_patch(tree, patch)[0]
        trees[stage] = before = tree
    return trees


@pytest.fixture
def mutate(stages: dict[str, Path], tmp_path: Path) -> Callable[[str, str, str, str], Path]:
    """A copy of one stage's tree with exactly one occurrence of `old` in file `rel` replaced by `new`."""
    counter = iter(range(100))

    def make(stage: str, rel: str, old: str, new: str) -> Path:
        tree = tmp_path / f"mutant{next(counter)}"
        shutil.copytree(stages[stage] / "ggml", tree / "ggml")
        text = (tree / rel).read_text()
        assert text.count(old) == 1, f"mutation anchor not unique in {rel}: {old!r}"
        (tree / rel).write_text(text.replace(old, new))
        return tree

    return make


def test_it_passes_every_check_on_the_committed_patches(pristine: Path) -> None:
    proc = subprocess.run(
        [sys.executable, str(PATCHES_DIR / "verify.py"), "--tree", str(pristine), "--json"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    checks = json.loads(proc.stdout)
    assert [c["name"] for c in checks] == EXPECTED_CHECKS
    assert [c for c in checks if not c["ok"]] == []
    assert proc.returncode == verify.EXIT_OK
    details = {c["name"]: c["detail"] for c in checks}
    # upstream's 12 Q4_0-family types x r1 2..5 plus 13 K-/i-quants x r1 3..5, then the i-quants reach r1 = 2 too
    assert (
        details["mv-ext-kernels[01]"] == "87 reachable (type, r1) pairs and all 100 mv-ext instantiations well-formed"
    )
    assert (
        details["mv-ext-kernels[01+02]"]
        == "95 reachable (type, r1) pairs and all 100 mv-ext instantiations well-formed"
    )
    assert details["added-kernels[01]"] == "exactly the 32 i-quant kernels"
    # 8 i-quants and the Q4_K control x ne00 {256, 512} x ne11 2..8 through mv-ext, plus 4 scalar (and after 02,
    # 4 vector) batch-1 kernels x ne00 {256, 768, 1024} x ne11 {1, 3}
    assert details["metal-run[01]"].startswith("150 passed, 0 failed")
    assert details["metal-run[01+02]"].startswith("174 passed, 0 failed")


def test_it_exits_2_and_says_make_fixtures_when_the_tree_is_missing(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, str(PATCHES_DIR / "verify.py"), "--tree", str(tmp_path / "nowhere")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == verify.EXIT_NO_TREE
    assert "make fixtures" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_it_fails_rather_than_skips_when_the_fixtures_are_missing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BENCHHUB_FIXTURES", str(tmp_path))
    with pytest.raises(pytest.fail.Exception, match="run `make fixtures`"):
        locate_pristine()


def test_it_names_the_variables_the_campaign_sets() -> None:
    patch_names, env = verify.campaign()
    assert patch_names == [PATCH_01.name, PATCH_02.name]
    assert env == VEC_ENV


# ---------------------------------------------------------------- patch 01 broken in a patched tree

KERNEL_LINE = (
    'template [[host_name("kernel_mul_mv_ext_iq3_xxs_f32_r1_4")]] kernel mul_mv_ext_q4x4_f32_t '
    "kernel_mul_mv_ext_q4x4_f32_disp<4, block_iq3_xxs, 256, dequantize_iq3_xxs>;\n"
)


def test_it_fails_when_an_instantiation_is_removed(pristine: Path, mutate: Callable[..., Path]) -> None:
    tree = mutate("01", verify.MUL_MV, KERNEL_LINE, "")
    kernels = verify.check_mv_ext_kernels(tree, "01")
    assert not kernels.ok
    assert "kernel_mul_mv_ext_iq3_xxs_f32_r1_4 missing: GGML_TYPE_IQ3_XXS" in kernels.detail
    added = verify.check_added_kernels(pristine, tree)
    assert not added.ok
    assert "missing kernel_mul_mv_ext_iq3_xxs_f32_r1_4" in added.detail


def test_it_fails_when_an_instantiation_is_misnamed(pristine: Path, mutate: Callable[..., Path]) -> None:
    tree = mutate("01", verify.MUL_MV, '"kernel_mul_mv_ext_iq2_xs_f32_r1_3"', '"kernel_mul_mv_ext_iq2xs_f32_r1_3"')
    kernels = verify.check_mv_ext_kernels(tree, "01")
    assert not kernels.ok
    assert "kernel_mul_mv_ext_iq2_xs_f32_r1_3 missing" in kernels.detail
    assert "unexpected kernel_mul_mv_ext_iq2xs_f32_r1_3" in verify.check_added_kernels(pristine, tree).detail


def test_it_fails_when_an_instantiation_points_at_the_wrong_dequantizer(mutate: Callable[..., Path]) -> None:
    tree = mutate(
        "01",
        verify.MUL_MV,
        "disp<5, block_iq1_m,   256, dequantize_iq1_m>",
        "disp<5, block_iq1_m,   256, dequantize_iq1_s>",
    )
    kernels = verify.check_mv_ext_kernels(tree, "01")
    assert not kernels.ok
    assert "kernel_mul_mv_ext_iq1_m_f32_r1_5 dequantizes with dequantize_iq1_s" in kernels.detail
    assert "dequantize_iq1_s takes (block_iq1_s, type4x4)" in kernels.detail
    ok, detail = verify_tools.metal_syntax(tree)
    assert not ok
    assert "explicit instantiation of 'kernel_mul_mv_ext_q4x4_f32_disp'" in detail


def test_it_fails_when_an_instantiation_has_the_wrong_block_size(mutate: Callable[..., Path]) -> None:
    tree = mutate("01", verify.MUL_MV, "disp<2, block_iq4_xs,  256,", "disp<2, block_iq4_xs,  32,")
    kernels = verify.check_mv_ext_kernels(tree, "01")
    assert not kernels.ok
    assert "kernel_mul_mv_ext_iq4_xs_f32_r1_2 declares 32 elements per block, block_iq4_xs holds 256" in kernels.detail


def test_it_fails_when_an_instantiation_has_the_wrong_r1(mutate: Callable[..., Path]) -> None:
    tree = mutate("01", verify.MUL_MV, "disp<5, block_iq2_s,", "disp<4, block_iq2_s,")
    kernels = verify.check_mv_ext_kernels(tree, "01")
    assert not kernels.ok
    assert "kernel_mul_mv_ext_iq2_s_f32_r1_5 instantiates r1=4" in kernels.detail


def test_it_fails_when_an_i_quant_is_not_admitted(pristine: Path, mutate: Callable[..., Path]) -> None:
    tree = mutate("01", verify.OPS, "           op->src[0]->type == GGML_TYPE_IQ1_M ||\n", "")
    admission = verify.check_admission(pristine, tree, "01")
    assert not admission.ok
    assert "GGML_TYPE_IQ1_M admitted at [], expected [4, 5, 6, 7, 8]" in admission.detail


def test_it_fails_when_another_types_default_changes(pristine: Path, mutate: Callable[..., Path]) -> None:
    tree = mutate("01", verify.OPS, "op->src[0]->type == GGML_TYPE_IQ4_NL ||\n", "")
    admission = verify.check_admission(pristine, tree, "01")
    assert not admission.ok
    assert "GGML_TYPE_IQ4_NL: [2, 3, 4, 5, 6, 7, 8] -> []" in admission.detail


def test_it_fails_when_the_patch_no_longer_applies(pristine: Path, tmp_path: Path) -> None:
    tree = tmp_path / "drifted"
    shutil.copytree(pristine / "ggml", tree / "ggml")
    metal = tree / verify.MUL_MV
    anchor = "kernel_mul_mv_ext_q4x4_f32_disp<5, block_q3_K, 256, dequantize_q3_K>;"
    metal.write_text(metal.read_text().replace(anchor, anchor.replace("256", "QK_K")))
    ok, detail = verify_tools.apply_patch(tree, PATCH_01)
    assert not ok
    assert "patch -p1 rejects 01-mv-ext-iquants.patch" in detail


def test_it_fails_when_a_patch_is_not_an_a_b_unified_diff(pristine: Path, tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    shutil.copytree(pristine / "ggml", tree / "ggml")
    crlf = tmp_path / PATCH_01.name
    crlf.write_text(PATCH_01.read_text().replace("\n", "\r\n"))
    ok, detail = verify_tools.apply_patch(tree, crlf)
    assert not ok
    assert "not an LF, a/ b/ prefixed unified diff" in detail


# ---------------------------------------------------------------- patch 02 broken in a patched tree


def test_it_fails_when_a_vector_kernel_is_chosen_without_its_variable(
    stages: dict[str, Path], mutate: Callable[..., Path]
) -> None:
    guard = (
        'static const bool use_vec = ggml_metal_env_flag_on("GGML_METAL_MV_IQ2_S_VEC");\n                if (use_vec) {'
    )
    tree = mutate("01+02", verify.DEVICE, guard, "{")
    gating = verify.check_vec_gating(stages["01"], tree, VEC_ENV)
    assert not gating.ok
    assert "GGML_TYPE_IQ2_S: a _vec suffix is chosen outside the environment guard" in gating.detail


def test_it_fails_when_a_guard_reads_another_variable(stages: dict[str, Path], mutate: Callable[..., Path]) -> None:
    tree = mutate("01+02", verify.DEVICE, '"GGML_METAL_MV_IQ2_XS_VEC"', '"GGML_METAL_MV_IQ2XS_VEC"')
    gating = verify.check_vec_gating(stages["01"], tree, VEC_ENV)
    assert not gating.ok
    assert "GGML_TYPE_IQ2_XS is switched by GGML_METAL_MV_IQ2XS_VEC" in gating.detail
    assert "the campaign sets" in gating.detail


def test_it_fails_when_a_vector_kernel_is_unreachable(stages: dict[str, Path], mutate: Callable[..., Path]) -> None:
    tree = mutate("01+02", verify.MUL_MV, '"kernel_mul_mv_iq3_xxs_f32_vec"', '"kernel_mul_mv_iq3_s_f32_vec"')
    gating = verify.check_vec_gating(stages["01"], tree, VEC_ENV)
    assert not gating.ok
    assert "kernel_mul_mv_iq3_s_f32_vec is added but no environment guard selects it" in gating.detail
    assert "GGML_TYPE_IQ3_XXS is switched to kernel_mul_mv_iq3_xxs_f32_vec, which does not exist" in gating.detail


def test_it_fails_when_the_switch_means_more_than_exactly_1(
    stages: dict[str, Path], mutate: Callable[..., Path]
) -> None:
    tree = mutate("01+02", verify.DEVICE, 'return val != nullptr && strcmp(val, "1") == 0;', "return val != nullptr;")
    gating = verify.check_vec_gating(stages["01"], tree, VEC_ENV)
    assert not gating.ok
    assert 'ggml_metal_env_flag_on does not mean exactly "1"' in gating.detail


def test_it_fails_when_a_sign_row_is_wrong(mutate: Callable[..., Path]) -> None:
    row = "{-1.f,  1.f,  1.f, -1.f}, { 1.f, -1.f,  1.f, -1.f}"
    tree = mutate("01+02", verify.MUL_MV, row, "{-1.f,  1.f,  1.f, -1.f}, {-1.f,  1.f,  1.f, -1.f}")
    table = verify.check_sign_table(tree)
    assert not table.ok
    assert table.detail == "wrong rows [10]"


def test_it_fails_when_a_vector_kernel_does_not_type_check(mutate: Callable[..., Path]) -> None:
    line = "sum += dot(yl[2*l + 0], float4(grid[0]) * kiq_sign4[signs & 0xf]);"
    tree = mutate("01+02", verify.MUL_MV, line, "sum += dot(yl[2*l + 0], grid[0]);")
    ok, detail = verify_tools.metal_syntax(tree)
    assert not ok
    assert "no matching function for call to 'dot'" in detail


def test_it_fails_when_a_vector_kernel_computes_a_wrong_result(mutate: Callable[..., Path]) -> None:
    line = "sum += dot(yl[2*l + 1], float4(grid[1]) * kiq_sign4[signs >>  4]);"
    tree = mutate("01+02", verify.MUL_MV, line, line.replace("signs >>  4", "signs & 0xf"))
    assert verify_tools.metal_syntax(tree)[0]
    ok, detail = verify_tools.metal_run(tree, with_vec=True)
    assert not ok
    assert "168 passed, 6 failed" in detail
    assert "FAIL kernel_mul_mv_iq2_xxs_f32_vec ne00=256 ne11=1" in detail


def test_it_fails_when_an_mv_ext_kernel_computes_a_wrong_result(mutate: Callable[..., Path]) -> None:
    tree = mutate("01+02", verify.MUL_MV, "disp<3, block_iq2_s,   256,", "disp<3, block_iq2_s,   128,")
    ok, detail = verify_tools.metal_run(tree, with_vec=True)
    assert not ok
    assert "FAIL kernel_mul_mv_ext_iq2_s_f32_r1_3 ne00=256 ne11=3" in detail


def test_it_fails_when_a_host_file_does_not_compile(mutate: Callable[..., Path]) -> None:
    tree = mutate(
        "01+02",
        verify.DEVICE,
        "static bool ggml_metal_env_flag_on(const char * name) {",
        "static bool ggml_metal_env_flag_on(const char * name) { undeclared();",
    )
    ok, detail = verify_tools.host_syntax(tree, [verify.DEVICE], [])
    assert not ok
    assert "ggml-metal-device.cpp does not compile" in detail
    assert "undeclared" in detail


def test_it_fails_when_a_patch_reaches_outside_ggml_metal(stages: dict[str, Path]) -> None:
    ok, detail = verify_tools.host_syntax(stages["01"], [], ["ggml/src/ggml-cpu/ggml-cpu.c"])
    assert not ok
    assert "touches files the CPU build compiles: ggml/src/ggml-cpu/ggml-cpu.c" in detail
