"""End to end with variants at two commits, the shape of few-row-mma (a pinned baseline and a pull
request's variant), for real: a local git repository holding the pinned llama.cpp tree and a trivial
commit on top published as `refs/pull/1/head` (the real PR branch cannot be fetched here), a draft
campaign pointing at it on a live server, pinned by the moderator's verb (the ref resolved once) and
published signed, `benchhub-agent run` (the installed console script), then the submission, its
commits and the leaderboard read back through the API.

The baseline commit is the same every run (fixed dates and author), so after the first run it comes
from the agent's binary cache under $BENCHHUB_FIXTURES/agent-home. The commit on top is new every run,
so every run proves the point: built in the same tree, it recompiles one file.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
import requests
from benchhub_agent.errors import ExitCode

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

FIXTURES = Path(os.environ.get("BENCHHUB_FIXTURES", Path.home() / ".cache" / "benchhub-fixtures"))
PRISTINE = FIXTURES / "llama.cpp-0c1e570"
MODEL = FIXTURES / "gemma-3-270m-q4_k_m.gguf"
AGENT_HOME = FIXTURES / "agent-home"
TOUCHED = "tools/batched-bench/main.cpp"  # compiled into one tool only: the smallest honest change
FIXED_IDENTITY = {
    "GIT_AUTHOR_NAME": "benchhub e2e",
    "GIT_AUTHOR_EMAIL": "e2e@benchhub.invalid",
    "GIT_COMMITTER_NAME": "benchhub e2e",
    "GIT_COMMITTER_EMAIL": "e2e@benchhub.invalid",
    "GIT_AUTHOR_DATE": "2026-11-29T12:00:00Z",
    "GIT_COMMITTER_DATE": "2026-11-29T12:00:00Z",
}


def git(*args: str, cwd: Path) -> str:
    env = {**os.environ, **FIXED_IDENTITY, "GIT_CEILING_DIRECTORIES": str(cwd.parent)}
    done = subprocess.run(["git", *args], cwd=cwd, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def two_commit_repository(folder: Path) -> tuple[str, str]:
    """The pinned tree as commit 1, a one-line change as commit 2 under refs/pull/1/head; master stays at 1."""
    shutil.copytree(PRISTINE, folder, ignore=lambda where, names: [".git"] if Path(where) == PRISTINE else [])
    git("init", "-q", "-b", "master", cwd=folder)
    git("config", "uploadpack.allowAnySHA1InWant", "true", cwd=folder)  # as GitHub allows: fetch by commit
    git("add", "-A", cwd=folder)
    git("commit", "-qm", "llama.cpp 0c1e570, pinned tree", cwd=folder)
    first = git("rev-parse", "HEAD", cwd=folder)
    with (folder / TOUCHED).open("a") as handle:
        handle.write(f"// benchhub e2e stand-in for a pull request, run {uuid.uuid4().hex}\n")
    git("commit", "-qam", "stand-in for a pull request", cwd=folder)
    second = git("rev-parse", "HEAD", cwd=folder)
    git("update-ref", "refs/pull/1/head", second, cwd=folder)
    git("reset", "-q", "--hard", first, cwd=folder)
    return first, second


def campaign_definition(repo: str, first: str) -> dict[str, Any]:
    return {
        "slug": "two-commits-e2e",
        "version": 1,
        "title": "Two commits (e2e)",
        "description": "A pinned baseline and a variant following a pull request ref.",
        "repo": repo,
        "baseline": "base",
        "variants": [
            {"name": "base", "commit": first, "ref": None, "patches": [], "env": {}},
            {"name": "pr-1", "commit": None, "ref": "refs/pull/1/head", "patches": [], "env": {}},  # a draft's
        ],
        "sweep": {
            "npp": 32,
            "ntg": 16,
            "n_ctx": 2048,
            "flash_attn": True,
            "n_gpu_layers": 99,
            "batch_sizes": [1, 2],
            "reps": 2,
            "extra_args": ["-pps"],
        },
        "correctness": {"tool": "test-backend-ops", "op": "MUL_MAT"},
    }


def run_agent(*args: str) -> subprocess.CompletedProcess[str]:
    agent = shutil.which("benchhub-agent", path=str(Path(sys.executable).parent))
    assert agent, "the benchhub-agent console script is not installed"
    env = {**os.environ, "BENCHHUB_HOME": str(AGENT_HOME)}
    return subprocess.run([agent, *args], capture_output=True, text=True, timeout=3600, env=env)


def build_log_compiles(log: Path) -> list[str]:
    return [line for line in log.read_text().splitlines() if "Building C" in line]


def test_it_measures_a_pinned_baseline_against_the_commit_a_ref_points_to(live_server: Any, tmp_path: Path) -> None:
    from benchhub_protocol import campaign_versions
    from django.core.management import call_command

    from benchhub.results.models import Campaign, CampaignVersion
    from tests.versioning import DEV_CAMPAIGN_KEY

    if not PRISTINE.is_dir() or not MODEL.is_file():
        pytest.fail(f"Fixtures missing in {FIXTURES}: run `make fixtures` (scripts/fixtures.sh) first.")
    first, second = two_commit_repository(tmp_path / "llama.cpp")
    repo = f"file://{tmp_path / 'llama.cpp'}"
    definition = campaign_definition(repo, first)
    created = Campaign.objects.create(
        slug=definition["slug"], title=definition["title"], repo=repo, baseline="base", definition=definition
    )
    CampaignVersion.objects.create(
        campaign=created,
        version=1,
        digest=campaign_versions.digest(definition),
        manifest=definition,
        state="draft",
        measured_from=1,
    )
    # The moderator pins the PR variant: the ref resolved once, the next version signed and published.
    (tmp_path / "v1.json").write_text(json.dumps({**definition, "signature": None}))
    key = tmp_path / "campaign.key"
    key.write_text(DEV_CAMPAIGN_KEY.seed.hex())
    key.chmod(0o600)
    call_command("pin_campaign_variant", str(tmp_path / "v1.json"), "pr-1", "--key", str(key), "--out",
                 str(tmp_path / "v2.json"))  # fmt: skip
    call_command("publish_campaign_version", str(tmp_path / "v2.json"))

    try:
        # Not bundled: its code is listed with the manifest's digest, and built once that digest is given.
        listed = run_agent("run", str(MODEL), "--server", live_server.url, "--campaign", "two-commits-e2e")
        assert listed.returncode == ExitCode.UNTRUSTED, listed.stderr[-4000:]
        digest = listed.stderr.split("manifest digest: ")[1].split()[0]
        done = run_agent(
            "run",
            str(MODEL),
            "--server",
            live_server.url,
            "--campaign",
            "two-commits-e2e",
            "--backend",
            "cpu",
            "--max-reps",
            "2",
            "--gen-tokens",
            "16",
            "--handle",
            "e2e-two-commits",
            "--trust-campaign",
            digest,
            "--yes",
            "--json",
        )
        assert done.returncode == 0, done.stderr[-4000:]
        summary = json.loads(done.stdout)
        logs = Path(summary["logs"])
        payload = json.loads((logs.parent / "payload.json").read_text())

        # The ref was resolved once by the moderator, and the result says which commit each variant measured.
        assert [(v["name"], v["commit"]) for v in payload["variants"]] == [("base", first), ("pr-1", second)]
        assert payload["campaign_digest"] == CampaignVersion.objects.get(campaign=created, version=2).digest
        assert payload["sweep"]["extra_args"] == ["-pps"] and payload["sweep"]["n_ctx"] == 2048
        commands = sorted(logs.glob("batched-bench-*.cmd"))
        assert len(commands) == 4 and all(" -pps " in path.read_text() for path in commands)
        assert all(" -c 2048 " in path.read_text() for path in commands)
        # The trivial commit changed one file: its build in the shared tree recompiled that file alone.
        assert [line.rsplit("/", 1)[-1] for line in build_log_compiles(logs / "build-pr-1.log")] == ["main.cpp.o"]
        # The terminal table labels variants by name; the status lines name the commits.
        assert "pr-1 against base:" in done.stderr
        assert f"pr-1 at {second[:12]}:" in done.stderr and f"base at {first[:12]}:" in done.stderr

        api = f"{live_server.url}/api/v1"
        detail = requests.get(f"{api}/submissions/{summary['id']}/", timeout=30).json()
        assert {v["name"]: v["commit"] for v in detail["variants"]} == {"base": first, "pr-1": second}
        assert "nonstandard_sweep" not in detail["flags"]
        page = requests.get(summary["url"], timeout=30).text
        assert f'title="{second}"' in page and "pinned from refs/pull/1/head" in page

        call_command("refresh_cells", summary["id"])
        board = requests.get(f"{api}/leaderboard/", params={"campaign": "two-commits-e2e"}, timeout=30).json()
        # A CPU build: correctness not run, so counted as left out for that reason, in no median.
        assert {
            (row["variant"], row["batch_size"]) for row in board["rows"] if row["excluded"]["correctness_not_run"]
        } >= {("pr-1", 1), ("pr-1", 2)}
    finally:
        # The commit on top is new every run: its source tree and binaries would only pile up in the cache.
        shutil.rmtree(AGENT_HOME / "cache" / "src" / f"git-{second}", ignore_errors=True)
        for built in (AGENT_HOME / "cache" / "bin").glob("*/build.json"):
            if second in built.read_text():
                shutil.rmtree(built.parent, ignore_errors=True)
