"""The moderator's verbs (docs/campaigns.md): a campaign key made offline, a PR variant pinned by
resolving its ref once (a local git repository stands in for GitHub), the version signed offline and
published on the service; and every way a version is refused, in one sentence."""

from __future__ import annotations

import io
import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from benchhub_protocol import campaign_versions
from django.core.management import CommandError, call_command
from django.test import Client

from tests.versioning import DEV_CAMPAIGN_KEY

PROTOCOL = Path(__file__).parents[2] / "protocol" / "benchhub_protocol" / "campaigns"
pytestmark = pytest.mark.django_db


def run(*args: str) -> str:
    out = io.StringIO()
    call_command(*args, stdout=out)
    return out.getvalue()


def git(*args: str, cwd: Path) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t"}
    env.update(GIT_COMMITTER_EMAIL="t@t", GIT_COMMITTER_DATE="2026-10-04T12:00:00+00:00")
    return subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True, text=True).stdout.strip()


@pytest.fixture
def dev_key(tmp_path: Path) -> Path:
    """The development campaign key as a moderator's key file (seed in hex, mode 600)."""
    path = tmp_path / "campaign.key"
    path.write_text(DEV_CAMPAIGN_KEY.seed.hex() + "\n")
    path.chmod(0o600)
    return path


@pytest.fixture
def pull_request(tmp_path: Path) -> tuple[str, str]:
    """A repository whose refs/pull/29869/head is one commit: (its file:// URL, the commit)."""
    repo = tmp_path / "llama.cpp"
    repo.mkdir()
    git("init", "-q", cwd=repo)
    (repo / "kernel.metal").write_text("// few rows\n")
    git("add", ".", cwd=repo)
    git("commit", "-qm", "few-row mma", cwd=repo)
    git("update-ref", "refs/pull/29869/head", "HEAD", cwd=repo)
    return f"file://{repo}", git("rev-parse", "HEAD", cwd=repo)


def test_a_moderator_pins_the_pr_signs_offline_and_publishes(
    campaign: Any, dev_key: Path, pull_request: tuple[str, str], tmp_path: Path, client: Client
) -> None:
    repo, commit = pull_request
    out = tmp_path / "v2.json"
    said = run("pin_campaign_variant", str(PROTOCOL / "few-row-mma" / "v1.json"), "pr-29869", "--key", str(dev_key),
               "--out", str(out), "--repo", repo)  # fmt: skip
    assert f"refs/pull/29869/head is at {commit}, committed 2026-10-04T12:00:00+00:00." in said
    pinned = json.loads(out.read_text())
    assert pinned["version"] == 2 and pinned["variants"][1]["commit"] == commit
    assert campaign_versions.verify(pinned, campaign_versions.trusted_keys()) == DEV_CAMPAIGN_KEY.keyid

    published = run("publish_campaign_version", str(out))
    assert "Published few-row-mma version 2 (open)" in published and f"commit: None -> {commit}" in published
    served = client.get("/api/v1/campaigns/few-row-mma/").json()
    assert (served["version"], served["state"], served["variants"][1]["commit"]) == (2, "open", commit)
    assert campaign_versions.verify(served, campaign_versions.trusted_keys()) == DEV_CAMPAIGN_KEY.keyid
    with pytest.raises(CommandError, match="at version 2: the next version is 3"):
        run("publish_campaign_version", str(out))


def test_each_verb_refuses_in_one_sentence(campaign: Any, dev_key: Path, tmp_path: Path) -> None:
    draft = PROTOCOL / "few-row-mma" / "v1.json"
    with pytest.raises(CommandError, match="names no commit: pin it"):
        run("sign_campaign_version", str(draft), "--key", str(dev_key), "--out", str(tmp_path / "x.json"))
    with pytest.raises(CommandError, match="Could not fetch refs/pull/29869/head"):
        run("pin_campaign_variant", str(draft), "pr-29869", "--key", str(dev_key), "--out", str(tmp_path / "y.json"),
            "--repo", f"file://{tmp_path}/nothing")  # fmt: skip
    dev_key.chmod(0o644)
    with pytest.raises(CommandError, match="can be read by others"):
        run("sign_campaign_version", str(draft), "--key", str(dev_key))
    dev_key.chmod(0o600)

    # A version signed with a key no release lists, then one not signed at all.
    stranger = tmp_path / "stranger.key"
    run("new_campaign_key", str(stranger))
    assert stranger.stat().st_mode & 0o777 == 0o600
    with pytest.raises(CommandError, match="never overwritten"):
        run("new_campaign_key", str(stranger))
    version = json.loads((PROTOCOL / "mv-ext-iquants" / "v1.json").read_text())
    version.update(version=2, min_effect=0.03)
    unsigned = tmp_path / "v2.json"
    unsigned.write_text(json.dumps({**version, "signature": None}))
    with pytest.raises(CommandError, match="is not signed: sign it offline first"):
        run("publish_campaign_version", str(unsigned))
    run("sign_campaign_version", str(unsigned), "--key", str(stranger))
    with pytest.raises(CommandError, match="does not verify under a trusted campaign key"):
        run("publish_campaign_version", str(unsigned))
    run("sign_campaign_version", str(unsigned), "--key", str(dev_key))
    assert "version 2 (open)" in run("publish_campaign_version", str(unsigned))


def test_a_closed_campaign_takes_no_more_results_and_keeps_its_versions(
    api: Any, ada: Any, payload_builder: Any, client: Client
) -> None:
    assert api.submit(payload_builder(), ada).status_code == 201
    assert "Closed mv-ext-iquants at version 1." in run("close_campaign", "mv-ext-iquants")
    refused = api.submit(payload_builder(), ada)
    assert (refused.status_code, refused.json()["error"], refused.json()["field"]) == (
        400,
        "campaign_closed",
        "campaign",
    )
    listed = client.get("/api/v1/campaigns/mv-ext-iquants/versions/").json()
    assert [(v["version"], v["state"]) for v in listed] == [(1, "closed")]
    with pytest.raises(CommandError, match="no published version to close"):
        run("close_campaign", "few-row-mma")
