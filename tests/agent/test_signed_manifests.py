"""Signed manifests (issue 42): the agent bundles the campaign public keys and refuses a manifest whose
signature does not verify, before anything of it is used or asked about, with exit code 16. A server
that changes any signed field, adds one, or serves a draft cannot make a machine build anything; the
bundled version served by a server runs; a newer signed version is announced with what it changed;
and a new campaign key comes with an agent release (key rotation)."""

from __future__ import annotations

import copy
import hashlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from benchhub_agent import campaign
from benchhub_agent.cli import main
from benchhub_agent.dirs import home
from benchhub_agent.errors import AgentError, ExitCode, exit_codes_help
from benchhub_protocol import campaign_versions, envelope
from click.testing import CliRunner

from tests.agent.loopback import SLUG, HostileServer, running
from tests.agent.test_preflight import GEMMA
from tests.versioning import DEV_CAMPAIGN_KEY


@pytest.fixture
def server() -> Iterator[HostileServer]:
    with running() as serving:
        yield serving


def run_agent(server: HostileServer, tiny: Path) -> Any:
    args = ["run", str(GEMMA), "--server", server.url, "--no-upload", "--backend", "cpu", "--llama-src", str(tiny)]
    return CliRunner().invoke(main, args, input="y\n")


def leaves(value: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """The path of every leaf (and of every empty list or map) of a JSON value."""
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    found = False
    for key, item in items:
        found = True
        yield from leaves(item, (*path, key))
    if not found:
        yield path


def tampered(manifest: dict[str, Any], path: tuple[Any, ...]) -> dict[str, Any]:
    """The manifest with the value at `path` changed as a server could: another value of the same kind."""
    changed = copy.deepcopy(manifest)
    *parents, last = path
    holder = changed
    for key in parents:
        holder = holder[key]
    value = holder[last]
    if isinstance(value, bool):
        holder[last] = not value
    elif isinstance(value, int | float):
        holder[last] = value + 1
    elif isinstance(value, str):
        holder[last] = "a" * 40 if len(value) == 40 else value[:-1] + ("0" if value[-1:] != "0" else "1")
    elif isinstance(value, list):
        holder[last] = [*value, 1] if not value else []
    elif isinstance(value, dict):
        holder[last] = {"GGML_METAL_MV_IQ2_XXS_VEC": "1"}
    else:
        holder[last] = "refs/pull/1/head" if last == "ref" else "x"
    return changed


def test_every_signed_field_changed_by_the_server_is_refused_before_any_patch_is_fetched(
    server: HostileServer,
) -> None:
    signed = campaign_versions.signed_body(server.manifest)
    paths = list(leaves(signed))
    assert len(paths) > 40  # every variant, patch hash, env switch, sweep setting and rule
    for path in paths:
        server.requested.clear()
        with pytest.raises(AgentError) as caught:
            campaign.from_manifest(tampered(server.manifest, path), home(), SLUG, server.url)
        # The signature is checked first: every changed field is refused by it (exit 16), whatever its
        # value, and nothing was downloaded.
        assert caught.value.code == ExitCode.SIGNATURE, (path, caught.value.message)
        assert server.requested == [], path
    with_extra = {**server.manifest, "extra": "a field the server added"}
    for refused in (with_extra, {**server.manifest, "signature": None}, {**server.manifest, "digest": "0" * 64}):
        with pytest.raises(AgentError) as caught:
            campaign.from_manifest(refused, home(), SLUG, server.url)
        assert caught.value.code == ExitCode.SIGNATURE
    plan = campaign.from_manifest(server.manifest, home(), SLUG, server.url)  # as served: it runs
    assert (plan.version, plan.digest) == (1, campaign_versions.digest(server.manifest))


def test_a_changed_manifest_stops_the_run_with_its_own_exit_code_before_any_prompt_or_read(
    server: HostileServer, tmp_path: Path, isolated_home: Path
) -> None:
    tiny = tmp_path / "tiny-src"
    tiny.mkdir()
    (tiny / "CMakeLists.txt").write_text("cmake_minimum_required(VERSION 3.14)\nproject(tiny NONE)\n")
    server.manifest["sweep"]["reps"] = 3  # within every bound: only the signature tells
    answer = run_agent(server, tiny)
    assert answer.exit_code == ExitCode.SIGNATURE == 16, answer.output
    assert "not signed by a campaign key this agent trusts" in answer.output.splitlines()[-1]
    assert "Build and run" not in answer.output and "Reading the model" not in answer.output
    assert not (isolated_home / "cache" / "build").exists() and not (isolated_home / "cache" / "sha256.json").exists()
    assert " 16  signature" in exit_codes_help()


def test_the_bundled_version_served_and_signed_runs_and_its_digest_goes_into_the_payload(
    server: HostileServer, tmp_path: Path
) -> None:
    tiny = tmp_path / "tiny-src"
    tiny.mkdir()
    (tiny / "CMakeLists.txt").write_text("cmake_minimum_required(VERSION 3.14)\nproject(tiny NONE)\n")
    answer = run_agent(server, tiny)
    assert answer.exit_code == ExitCode.BUILD, answer.output  # past the signature and the trust check
    assert f"{SLUG} version 1: manifest from the server, signed by the campaign key" in answer.output
    assert campaign.load(SLUG, server.url, home())[0].digest == campaign_versions.digest(server.manifest)


def test_a_contributor_with_an_older_bundled_version_is_told_what_the_open_one_changed(
    server: HostileServer, tmp_path: Path
) -> None:
    server.manifest["version"] = 2
    server.manifest["variants"][2]["env"]["GGML_METAL_MV_IQ2_XXS_VEC"] = "0"
    server.sign()
    args = ["run", str(GEMMA), "--server", server.url, "--no-upload", "--backend", "cpu", "--llama-src", str(tmp_path)]
    answer = CliRunner().invoke(main, args)
    assert "Campaign mv-ext-iquants version 2 is open; this agent bundles version 1." in answer.output
    assert "What changed: variant 01+02 env:" in answer.output and "'GGML_METAL_MV_IQ2_XXS_VEC': '0'" in answer.output
    assert answer.exit_code == ExitCode.UNTRUSTED, answer.output  # signed, but not bundled: still asked


def test_a_draft_served_by_the_server_runs_nothing(server: HostileServer) -> None:
    draft = {**campaign_versions.bundled_versions()["few-row-mma"][0], "state": "draft"}
    with pytest.raises(AgentError) as caught:
        campaign.from_manifest(draft, home(), "few-row-mma", server.url)
    assert caught.value.code == ExitCode.CAMPAIGN and "no open version yet" in caught.value.message
    pinned_by_the_server = {**draft, "state": "open"}
    pinned_by_the_server["variants"] = copy.deepcopy(draft["variants"])
    pinned_by_the_server["variants"][1]["commit"] = "b" * 40
    with pytest.raises(AgentError) as caught:
        campaign.from_manifest(pinned_by_the_server, home(), "few-row-mma", server.url)
    assert caught.value.code == ExitCode.SIGNATURE


def test_a_new_campaign_key_is_trusted_once_a_release_lists_it(
    server: HostileServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Rotation as docs/campaigns.md describes it: a release lists the new key beside the old one, new
    versions are signed with the new key, and a later release drops the old one."""
    new_key = envelope.Signer.from_seed(hashlib.sha256(b"benchhub-test-rotated-campaign-key").digest())
    server.manifest["version"] = 2
    server.sign(new_key)
    with pytest.raises(AgentError) as caught:  # this release does not know the new key
        campaign.from_manifest(server.manifest, home(), SLUG, server.url)
    assert caught.value.code == ExitCode.SIGNATURE

    def release(*signers: envelope.Signer) -> None:
        entries = [{"keyid": s.keyid, "public_key": s.public_key_b64} for s in signers]
        monkeypatch.setattr(campaign_versions, "trusted_keys", lambda: campaign_versions.keys_from(entries))

    release(DEV_CAMPAIGN_KEY, new_key)
    assert campaign.from_manifest(server.manifest, home(), SLUG, server.url).version == 2
    release(new_key)  # the old key retired: what it signs no longer runs
    old = {**server.manifest, "signature": campaign_versions.sign(server.manifest, DEV_CAMPAIGN_KEY)}
    with pytest.raises(AgentError) as caught:
        campaign.from_manifest(old, home(), SLUG, server.url)
    assert caught.value.code == ExitCode.SIGNATURE
