from __future__ import annotations

import hashlib
import os
import shutil
import tarfile
import time
from pathlib import Path
from typing import Any

import pytest
from benchhub_agent import build, campaign, source, worktree
from benchhub_agent.dirs import home
from benchhub_agent.errors import AgentError, ExitCode

FIXTURES = Path(os.environ.get("BENCHHUB_FIXTURES", Path.home() / ".cache/benchhub-fixtures"))
LLAMA_SRC = FIXTURES / "llama.cpp-0c1e570"
METAL_FILES = (
    "ggml/src/ggml-metal/ggml-metal-ops.cpp",
    "ggml/src/ggml-metal/ggml-metal-device.cpp",
    "ggml/src/ggml-metal/kernels/mul_mv.metal",
)


@pytest.fixture
def _source_fetched() -> None:
    """A missing fixture fails the run (never a skip reported as a pass): `make test` fetches it."""
    if not LLAMA_SRC.is_dir():
        pytest.fail(f"{LLAMA_SRC} is missing: run `make fixtures` (scripts/fixtures.sh).")


needs_source = pytest.mark.usefixtures("_source_fetched")


def metal_subset(target: Path) -> Path:
    """The files the campaign's patches touch, copied from the real tree at the pinned commit."""
    for relative in METAL_FILES:
        (target / relative).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(LLAMA_SRC / relative, target / relative)
    (target / "CMakeLists.txt").write_text("# stand-in\n")
    # The vendored tree of llama-cpp-python is a submodule: its `.git` is a file naming a repo that is not there.
    (target / ".git").write_text("gitdir: ../../.git/modules/vendor/llama.cpp\n")
    return target


@needs_source
def test_it_applies_each_variant_and_gives_the_tree_back_for_the_next(tmp_path: Path) -> None:
    plan = campaign.bundled("mv-ext-iquants")
    pristine = metal_subset(tmp_path / "pristine")
    tree = worktree.WorkTree(pristine, tmp_path / "work")
    tree.ensure()
    kernels = tree.path / METAL_FILES[2]
    tree.apply(plan.variant("01+02").patches)
    patched = kernels.read_bytes()
    assert patched != (pristine / METAL_FILES[2]).read_bytes()
    assert b"kernel_mul_mv_ext_iq2_xxs" in patched or b"iq2_xxs" in patched
    before = kernels.stat().st_mtime_ns
    time.sleep(0.01)
    tree.apply(plan.variant("upstream").patches)
    assert kernels.read_bytes() == (pristine / METAL_FILES[2]).read_bytes()
    assert kernels.stat().st_mtime_ns > before  # make must see the restored file as changed
    tree.apply(plan.variant("01").patches)
    tree.restore()
    for relative in METAL_FILES:
        assert (tree.path / relative).read_bytes() == (pristine / relative).read_bytes()


@needs_source
def test_it_names_the_patch_that_does_not_apply_and_leaves_the_tree_clean(tmp_path: Path) -> None:
    plan = campaign.bundled("mv-ext-iquants")
    pristine = metal_subset(tmp_path / "pristine")
    (pristine / METAL_FILES[2]).write_text("// a different upstream\n")
    tree = worktree.WorkTree(pristine, tmp_path / "work")
    tree.ensure()
    with pytest.raises(AgentError) as caught:
        tree.apply(plan.variant("01").patches)
    assert caught.value.code == ExitCode.SOURCE and "01-mv-ext-iquants.patch" in caught.value.message
    assert (tree.path / METAL_FILES[0]).read_bytes() == (pristine / METAL_FILES[0]).read_bytes()


def test_it_extracts_a_source_tarball_once(tmp_path: Path) -> None:
    folder = tmp_path / "llama.cpp-x"
    folder.mkdir()
    (folder / "CMakeLists.txt").write_text("project(x)\n")
    tarball = tmp_path / "src.tar.gz"
    with tarfile.open(tarball, "w:gz") as archive:
        archive.add(folder, arcname="llama.cpp-x")
    first = source.from_user(tarball, home())
    assert (first / "CMakeLists.txt").read_text() == "project(x)\n"
    assert source.from_user(tarball, home()) == first


def test_it_refuses_a_source_that_is_not_llama_cpp(tmp_path: Path) -> None:
    with pytest.raises(AgentError, match=r"neither a directory nor a \.tar\.gz"):
        source.from_user(tmp_path / "nothing.zip", home())
    (tmp_path / "empty").mkdir()
    with pytest.raises(AgentError, match=r"no llama\.cpp source tree"):
        source.from_user(tmp_path / "empty", home())


def test_it_hashes_the_bundled_patches_from_their_bytes() -> None:
    plan = campaign.bundled("mv-ext-iquants")
    assert [variant.name for variant in plan.variants] == ["upstream", "01", "01+02"]
    for variant in plan.variants:
        for patch in variant.patches:
            assert patch.sha256 == hashlib.sha256(patch.path.read_bytes()).hexdigest()


def test_it_keys_builds_by_everything_that_shapes_the_binaries() -> None:
    plan = campaign.bundled("mv-ext-iquants")
    cpu, cuda = build.BuildConfig("cpu"), build.BuildConfig("cuda")
    tree = "a" * 40
    key = build.binary_key(plan.variant("01"), cpu, "gcc 12", build.TOOLS, tree)
    assert key == build.binary_key(plan.variant("01"), cpu, "gcc 12", build.TOOLS, tree)
    assert key != build.binary_key(plan.variant("upstream"), cpu, "gcc 12", build.TOOLS, tree)
    assert key != build.binary_key(plan.variant("01"), cuda, "gcc 12", build.TOOLS, tree)
    assert key != build.binary_key(plan.variant("01"), cpu, "gcc 13", build.TOOLS, tree)
    flagged = build.BuildConfig("cpu", ("-DX=1",))
    assert key != build.binary_key(plan.variant("01"), flagged, "gcc 12", build.TOOLS, tree)
    assert key != build.binary_key(plan.variant("01"), cpu, "gcc 12", build.TOOLS, "b" * 40)


@pytest.mark.django_db(transaction=True)
def test_it_follows_the_server_manifest_and_verifies_each_downloaded_patch(live_server: Any) -> None:
    from benchhub.results.campaigns import sync_campaigns
    from benchhub.results.models import Campaign

    sync_campaigns(Campaign)
    plan, fallback = campaign.load("mv-ext-iquants", live_server.url, home())
    assert fallback is None and plan.source == "server"
    bundled = campaign.bundled("mv-ext-iquants")
    assert [v.as_payload() for v in plan.variants] == [v.as_payload() for v in bundled.variants]
    for variant in plan.variants:
        for patch, shipped in zip(variant.patches, bundled.variant(variant.name).patches, strict=True):
            assert patch.path != shipped.path  # downloaded from the server, not read from the package
            assert patch.path.read_bytes() == shipped.path.read_bytes()


@pytest.mark.django_db(transaction=True)
def test_it_refuses_a_patch_whose_bytes_do_not_match_the_manifest(live_server: Any) -> None:
    from benchhub_agent import client

    from benchhub.results.campaigns import sync_campaigns
    from benchhub.results.models import Campaign

    sync_campaigns(Campaign)
    manifest = client.get_json(live_server.url, "/api/v1/campaigns/mv-ext-iquants/").body
    other = manifest["variants"][2]["patches"][1]["url"]
    manifest["variants"][1]["patches"][0]["url"] = other  # not signed: the bytes are checked instead
    with pytest.raises(AgentError) as caught:
        campaign.from_manifest(manifest, home(), server=live_server.url)
    assert caught.value.code == ExitCode.CAMPAIGN and "refused" in caught.value.message
    manifest["variants"][1]["patches"][0]["sha256"] = hashlib.sha256(b"other bytes").hexdigest()
    with pytest.raises(AgentError) as caught:
        campaign.from_manifest(manifest, home(), server=live_server.url)
    assert caught.value.code == ExitCode.SIGNATURE  # a signed field: refused before any download


def test_it_falls_back_to_the_bundled_campaign_when_the_server_is_unreachable() -> None:
    plan, fallback = campaign.load("mv-ext-iquants", "http://127.0.0.1:9", home())
    assert plan.source == "bundled" and fallback and "127.0.0.1:9" in fallback


def test_it_never_builds_a_variant_that_follows_a_ref_without_a_pinned_commit(tmp_path: Path) -> None:
    from benchhub_agent import pipeline
    from benchhub_agent.progress import Progress

    draft = campaign.bundled("few-row-mma")  # version 1 is a draft: its PR variant names no commit
    options = pipeline.RunOptions(model_path=tmp_path / "m.gguf", server=None, campaign_slug="few-row-mma")
    with pytest.raises(AgentError, match="names no commit") as caught:
        pipeline.run(options, draft, home(), Progress())
    assert caught.value.code == ExitCode.CAMPAIGN and "refs/pull/29869/head" in caught.value.message
    assert not (tmp_path / "m.gguf").exists() and not (home().cache / "src").exists()


STAND_IN_CMAKE = """cmake_minimum_required(VERSION 3.14)
project(stand_in C)
set(CMAKE_RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/bin)
add_executable(stand-in-tool tool/main.c tool/helper.c)
"""
HELPER_PATCH = """diff --git a/tool/helper.c b/tool/helper.c
--- a/tool/helper.c
+++ b/tool/helper.c
@@ -1 +1 @@
-int helper(void) { return 1; }
+int helper(void) { return 2; }
"""


@needs_source
def test_it_compiles_for_a_later_variant_only_what_its_patches_change(tmp_path: Path) -> None:
    """Real cmake and make on a small project holding the real Metal sources the campaign's patches touch
    (not compiled on CPU) and two compiled files: variants 01 and 01+02 must compile nothing, a patch to
    one compiled file must compile that file alone, so that building them costs a fraction of the first."""
    pristine = metal_subset(tmp_path / "pristine")
    (pristine / "CMakeLists.txt").write_text(STAND_IN_CMAKE)
    (pristine / "tool").mkdir()
    (pristine / "tool" / "main.c").write_text("int helper(void);\nint main(void) { return helper() - 1; }\n")
    (pristine / "tool" / "helper.c").write_text("int helper(void) { return 1; }\n")
    (tmp_path / "helper.patch").write_text(HELPER_PATCH)
    plan = campaign.bundled("mv-ext-iquants")
    helper = campaign.Patch(
        "helper.patch", hashlib.sha256(HELPER_PATCH.encode()).hexdigest(), tmp_path / "helper.patch"
    )
    variants = [*plan.variants, campaign.Variant("helper", plan.variants[0].commit, (helper,))]
    logs = tmp_path / "logs"

    built = build.build_variants(
        variants, pristine, build.BuildConfig("cpu"), home(), logs, lambda detail, fraction: None, ("stand-in-tool",)
    )

    assert [item.cached for item in built] == [False, False, False, False]
    spent = {item.variant: build.summarize_build_log(logs / f"build-{item.variant}.log") for item in built}
    assert (spent["upstream"].compiled, spent["upstream"].linked) == (2, 1)
    assert spent["upstream"].seconds > 0  # configure and compile, each step's seconds written to the log
    assert (spent["01"].compiled, spent["01"].linked) == (0, 0)
    assert (spent["01+02"].compiled, spent["01+02"].linked) == (0, 0)
    assert (spent["helper"].compiled, spent["helper"].linked) == (1, 1)
