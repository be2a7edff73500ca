"""The few-row-mma campaign on the agent's side: a draft until its PR variant is pinned, then variants
at different commits, fetched into one object store, built in one working tree that moves between commits, and
the campaign's own batched-bench switches carried into the command line and the payload."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest
from benchhub_agent import campaign, pipeline, report, source, sweep, worktree
from benchhub_agent.dirs import home
from benchhub_agent.errors import AgentError, ExitCode
from benchhub_protocol import schema

from tests.conftest import build_payload

MASTER = "836d57176dc699a726c55418e4f96b8ca628e1bf"


def git(*args: str, cwd: Path) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t"}
    env["GIT_COMMITTER_EMAIL"] = "t@t"
    return subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True, text=True).stdout.strip()


def options(**overrides: object) -> pipeline.RunOptions:
    return pipeline.RunOptions(model_path=Path("m.gguf"), server=None, campaign_slug="few-row-mma", **overrides)  # type: ignore[arg-type]


def test_it_ships_the_campaign_as_a_draft_whose_pr_variant_waits_for_a_pinned_commit() -> None:
    plan = campaign.bundled("few-row-mma")
    assert plan.baseline == "master-836d571" and (plan.version, plan.digest) == (1, "")
    assert [(v.name, v.commit, v.ref, v.patches) for v in plan.variants] == [
        ("master-836d571", MASTER, None, ()),
        ("pr-29869", "", "refs/pull/29869/head", ()),
    ]
    with pytest.raises(AgentError) as caught:
        campaign.require_pinned(plan)
    assert caught.value.code == ExitCode.CAMPAIGN and "is a draft" in caught.value.message
    assert {1, 2, 3, 4, 8} <= set(plan.sweep["batch_sizes"]) and max(plan.sweep["batch_sizes"]) == 16


def test_it_runs_batched_bench_as_the_pr_did_and_says_so_in_the_payload() -> None:
    settings = pipeline._settings(campaign.bundled("few-row-mma"), options())
    args = sweep.batched_bench_args(Path("/bin/llama-batched-bench"), Path("m.gguf"), settings)
    joined = " ".join(args)
    # The first two batch sizes warm the process up and are dropped (sweep.measured_rows).
    assert "-npp 512 -ntg 32 -npl 1,2,1,2,3,4,5,6,8,12,16 -c 32768 -kvu" in joined
    assert "-pps" in args
    payload = build_payload()
    payload["sweep"] = {**settings.as_payload(payload["sweep"]["runs"]), "batch_sizes": [1, 4, 8]}
    schema.validate_submission(payload)
    assert payload["sweep"]["extra_args"] == ["-pps"] and payload["sweep"]["n_ctx"] == 32768


def test_it_computes_the_context_where_a_campaign_does_not_pin_it() -> None:
    settings = pipeline._settings(campaign.bundled("mv-ext-iquants"), options(batch_sizes=(1, 2)))
    assert settings.n_ctx == sweep.context_size(128, 64, (1, 2)) and settings.extra_args == ()


def test_it_refuses_a_switch_the_agent_does_not_know_and_the_schema_refuses_it_too() -> None:
    plan = campaign.bundled("few-row-mma")
    hostile = campaign.Campaign(
        plan.slug, plan.repo, plan.baseline, plan.variants, {**plan.sweep, "extra_args": ["-o", "/etc/x"]}, "server"
    )
    with pytest.raises(AgentError) as caught:
        pipeline._settings(hostile, options())
    assert caught.value.code == ExitCode.CAMPAIGN and "-o" in caught.value.message
    payload = build_payload()
    payload["sweep"]["extra_args"] = ["-o"]
    with pytest.raises(schema.SchemaViolation) as refused:
        schema.validate_submission(payload)
    assert refused.value.field == "sweep.extra_args[0]"


def test_it_refuses_one_source_tree_for_variants_at_two_commits(tmp_path: Path) -> None:
    plan = campaign.bundled("few-row-mma")
    variants = [plan.variants[0], campaign.Variant("pr-29869", "b" * 40, (), {}, "refs/pull/29869/head")]
    with pytest.raises(AgentError) as caught:
        pipeline._binaries(variants, plan, options(llama_src=tmp_path), "cpu", home(), tmp_path, None)  # type: ignore[arg-type]
    assert caught.value.code == ExitCode.USAGE and "2 commits" in caught.value.message


def test_it_fetches_a_second_commit_without_downloading_the_first_again(tmp_path: Path) -> None:
    upstream = tmp_path / "upstream"
    upstream.mkdir()
    git("init", "-q", cwd=upstream)
    git("config", "uploadpack.allowAnySHA1InWant", "true", cwd=upstream)
    (upstream / "CMakeLists.txt").write_text("project(x)\n")
    (upstream / "weights.bin").write_bytes(os.urandom(2_000_000))  # incompressible: its size shows in the pack
    git("add", ".", cwd=upstream)
    git("commit", "-qm", "first", cwd=upstream)
    first = git("rev-parse", "HEAD", cwd=upstream)
    (upstream / "kernel.metal").write_text("// few rows\n")
    git("add", ".", cwd=upstream)
    git("commit", "-qm", "second", cwd=upstream)
    second = git("rev-parse", "HEAD", cwd=upstream)  # a pinned commit: the agent resolves no ref
    git("reset", "-q", "--hard", first, cwd=upstream)
    repo = f"file://{upstream}"

    first_tree = source.from_git(repo, first, home())
    store = home().sources / "git-objects"
    size_after_first = sum(path.stat().st_size for path in store.rglob("*") if path.is_file())
    second_tree = source.from_git(repo, second, home())
    size_after_second = sum(path.stat().st_size for path in store.rglob("*") if path.is_file())

    assert first_tree != second_tree
    assert not (first_tree / "kernel.metal").exists() and (second_tree / "kernel.metal").read_text() == "// few rows\n"
    assert (second_tree / "weights.bin").read_bytes() == (first_tree / "weights.bin").read_bytes()
    assert size_after_first > 2_000_000
    assert size_after_second - size_after_first < 200_000  # the new file and a commit, not the 2 MB again


def test_it_moves_the_working_tree_to_another_commit_rewriting_only_what_differs(tmp_path: Path) -> None:
    first, second = tmp_path / "first", tmp_path / "second"
    for tree, text in ((first, "// master\n"), (second, "// few rows\n")):
        (tree / "ggml" / "src").mkdir(parents=True)
        (tree / "CMakeLists.txt").write_text("project(x)\n")
        (tree / "ggml" / "src" / "kernel.metal").write_text(text)
    (first / "ggml" / "src" / "gone.c").write_text("int gone;\n")
    (second / "ggml" / "src" / "new.c").write_text("int added;\n")
    (second / "ggml" / "link.c").symlink_to("src/new.c")

    work = tmp_path / "work"
    worktree.WorkTree(first, work).ensure()
    unchanged, kernel = work / "CMakeLists.txt", work / "ggml" / "src" / "kernel.metal"
    unchanged_mtime, kernel_mtime = unchanged.stat().st_mtime_ns, kernel.stat().st_mtime_ns
    time.sleep(0.01)
    worktree.WorkTree(second, work).ensure()

    assert kernel.read_text() == "// few rows\n" and kernel.stat().st_mtime_ns > kernel_mtime
    assert unchanged.stat().st_mtime_ns == unchanged_mtime  # make leaves what did not change alone
    assert not (work / "ggml" / "src" / "gone.c").exists()
    assert (work / "ggml" / "src" / "new.c").read_text() == "int added;\n"
    assert os.readlink(work / "ggml" / "link.c") == "src/new.c"
    worktree.WorkTree(first, work).ensure()
    assert kernel.read_text() == "// master\n" and (work / "ggml" / "src" / "gone.c").is_file()
    assert not (work / "ggml" / "link.c").is_symlink() and not (work / "ggml" / "src" / "new.c").exists()


def test_it_prints_the_commit_each_variant_measured() -> None:
    payload = build_payload()
    lines = report.status_lines(payload)
    for variant, line in zip(payload["variants"], lines, strict=False):
        assert line.startswith(f"{variant['name']} at {variant['commit'][:12]}:")


def test_it_knows_before_a_run_which_settings_the_service_will_keep_out_of_its_cells() -> None:
    plan = campaign.bundled("few-row-mma")
    changed = pipeline._settings(plan, options(npp=128, batch_sizes=(1, 32)))
    assert sweep.sweep_differences(changed.as_payload([]), plan.sweep) == [
        "npp 128 instead of 512",
        "batch sizes 32 outside the campaign's",
    ]
    subset = pipeline._settings(plan, options(batch_sizes=(1, 4)))
    assert sweep.sweep_differences(subset.as_payload([]), plan.sweep) == []
