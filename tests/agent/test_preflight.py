"""What `benchhub-agent run` settles before it reads the model or builds: code it did not ship with is
shown and needs an explicit yes, a wrong server fails in the first second, an unregistered key and a
missing campaign fail before building, and a Mac on battery or under Rosetta is told so first."""

from __future__ import annotations

import hashlib
import os
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from benchhub_agent import campaign, preflight, trust
from benchhub_agent.cli import main
from benchhub_agent.errors import AgentError, ExitCode
from click.testing import CliRunner, Result

from tests.agent.loopback import SLUG, HostileServer, running

FIXTURES = Path(os.environ.get("BENCHHUB_FIXTURES", Path.home() / ".cache/benchhub-fixtures"))
GEMMA = FIXTURES / "gemma-3-270m-q4_k_m.gguf"
PATCH_01 = "01-mv-ext-iquants.patch"


@pytest.fixture
def server() -> Iterator[HostileServer]:
    with running() as serving:
        yield serving


@pytest.fixture
def tiny_source(tmp_path: Path) -> Path:
    """A CMake project that configures in a second and has none of llama.cpp's targets: a run that gets
    past the preflight stops at its build with ExitCode.BUILD."""
    if not GEMMA.is_file():
        pytest.fail(f"{GEMMA} is missing: run `make fixtures` (scripts/fixtures.sh).")
    tiny = tmp_path / "tiny-src"
    tiny.mkdir()
    (tiny / "CMakeLists.txt").write_text("cmake_minimum_required(VERSION 3.14)\nproject(tiny NONE)\n")
    return tiny


def changed_patch(server: HostileServer) -> bytes:
    """Patch 01 with one more context-free line at the end: other bytes, so not the bundled patch; signed
    by the campaign key (a version this agent does not bundle), so the trust check is what answers."""
    data = server.files[PATCH_01] + b"\n"
    server.files[PATCH_01] = data
    for variant in server.manifest["variants"]:
        for patch in variant["patches"]:
            if patch["name"] == PATCH_01:
                patch["sha256"] = hashlib.sha256(data).hexdigest()
    server.sign()
    return data


def run_agent(server: HostileServer, tiny: Path, *extra: str) -> Result:
    args = ["run", str(GEMMA), "--server", server.url, "--no-upload", "--backend", "cpu", "--llama-src", str(tiny)]
    return CliRunner().invoke(main, [*args, *extra])


def nothing_read_or_built(home: Path) -> bool:
    return not (home / "cache" / "build").exists() and not (home / "cache" / "sha256.json").exists()


def test_it_shows_a_changed_patch_and_builds_nothing_without_an_explicit_yes(
    server: HostileServer, tiny_source: Path, isolated_home: Path
) -> None:
    data = changed_patch(server)
    answer = run_agent(server, tiny_source, "--yes")  # --yes is for publishing, not for code
    assert answer.exit_code == ExitCode.UNTRUSTED, answer.output
    assert f"patch {PATCH_01}: {len(data)} bytes, sha256 {hashlib.sha256(data).hexdigest()}" in answer.output
    assert "touches: ggml/src/ggml-metal/ggml-metal-device.cpp, " in answer.output
    assert "--trust-campaign mv-ext-iquants@sha256:" in answer.output.splitlines()[-1]
    assert nothing_read_or_built(isolated_home)


def test_it_builds_a_changed_patch_when_told_to_trust_that_campaign(
    server: HostileServer, tiny_source: Path, isolated_home: Path
) -> None:
    changed_patch(server)
    plain = run_agent(server, tiny_source, "--trust-campaign", SLUG)
    assert plain.exit_code == ExitCode.UNTRUSTED, plain.output  # a slug alone trusts only the bundled copy
    digest = plain.output.split("manifest digest: ")[1].split()[0]
    answer = run_agent(server, tiny_source, "--trust-campaign", digest)
    assert f"Trusted with --trust-campaign {digest}." in answer.output
    assert answer.exit_code == ExitCode.BUILD, answer.output  # past the preflight, into the (tiny) build
    other = run_agent(server, tiny_source, "--trust-campaign", "few-row-mma@sha256:" + digest.split(":")[1])
    assert other.exit_code == ExitCode.UNTRUSTED  # trusting one campaign trusts no other


def test_it_builds_the_bundled_campaign_served_by_a_server_without_asking(
    server: HostileServer, tiny_source: Path
) -> None:
    answer = run_agent(server, tiny_source)
    assert "not the one bundled" not in answer.output
    assert answer.exit_code == ExitCode.BUILD, answer.output


def test_it_asks_about_untrusted_code_at_a_prompt_and_takes_no_for_an_answer(server: HostileServer) -> None:
    from benchhub_agent.dirs import home

    changed_patch(server)
    plan = campaign.from_manifest(server.manifest, home(), SLUG, server.url)
    shown: list[str] = []
    with pytest.raises(AgentError) as caught:
        trust.confirm(plan, None, False, True, shown.append, lambda question: False)
    assert caught.value.code == ExitCode.UNTRUSTED and PATCH_01 in shown[0]
    trust.confirm(plan, None, False, True, shown.append, lambda question: True)
    assert not trust.is_bundled(plan) and trust.is_bundled(campaign.bundled(SLUG))


def test_it_treats_a_campaign_this_agent_never_bundled_as_untrusted(server: HostileServer) -> None:
    from benchhub_agent.dirs import home

    plan = campaign.from_manifest(server.manifest, home(), SLUG, server.url)
    renamed = campaign.Campaign("mv-ext-iquants-2", plan.repo, plan.baseline, plan.variants, plan.sweep, "server")
    moved = campaign.Campaign(SLUG, "https://example.com/fork/llama.cpp", plan.baseline, plan.variants, {}, "server")
    assert trust.is_bundled(plan)
    assert not trust.is_bundled(renamed) and not trust.is_bundled(moved)


def test_it_names_the_files_a_patch_touches() -> None:
    text = (
        "diff --git a/x/y.c b/x/y.c\n--- a/x/y.c\n+++ b/x/y.c\ndiff --git a/new.h b/new.h\n--- /dev/null\n+++ b/new.h\n"
    )
    assert trust.files_touched(text) == ["new.h", "x/y.c"]


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_it_fails_within_a_second_on_a_wrong_server_when_it_would_upload(isolated_home: Path) -> None:
    started = time.monotonic()
    answer = CliRunner().invoke(main, ["run", str(GEMMA), "--server", f"http://127.0.0.1:{closed_port()}"])
    assert time.monotonic() - started < 1.0
    assert answer.exit_code == ExitCode.UPLOAD and "Could not reach" in answer.output
    assert nothing_read_or_built(isolated_home)


def test_it_fails_before_building_when_the_server_lacks_the_campaign(
    server: HostileServer, isolated_home: Path
) -> None:
    answer = CliRunner().invoke(main, ["run", str(GEMMA), "--server", server.url, "--campaign", "few-row-mma"])
    assert answer.exit_code == ExitCode.CAMPAIGN and "has no campaign few-row-mma (HTTP 404)" in answer.output
    assert nothing_read_or_built(isolated_home)


def test_it_fails_before_building_when_the_key_is_not_registered(server: HostileServer, isolated_home: Path) -> None:
    answer = CliRunner().invoke(main, ["run", str(GEMMA), "--server", server.url])
    assert answer.exit_code == ExitCode.UPLOAD and "pass --handle NAME" in answer.output
    assert nothing_read_or_built(isolated_home) and server.received == []


def test_it_registers_the_key_before_building_when_given_a_handle(
    server: HostileServer, tiny_source: Path, isolated_home: Path
) -> None:
    server.posts["/api/v1/contributors/"] = lambda body: (201, {"handle": "ada", "keyid": "k"})
    args = ["run", str(GEMMA), "--server", server.url, "--handle", "ada", "--llama-src", str(tiny_source)]
    answer = CliRunner().invoke(main, [*args, "--backend", "cpu"])
    assert "Registered key" in answer.output and answer.exit_code == ExitCode.BUILD, answer.output
    assert [path for path, _ in server.received] == ["/api/v1/contributors/"]


def test_it_refuses_a_python_running_under_rosetta_with_the_fix() -> None:
    def translated(args: list[str]) -> str | None:
        return "1\n" if args == ["sysctl", "-n", "sysctl.proc_translated"] else None

    with pytest.raises(AgentError) as caught:
        preflight.refuse_rosetta(translated, "Darwin")
    assert caught.value.code == ExitCode.PLATFORM and "install an arm64 Python" in caught.value.message
    preflight.refuse_rosetta(lambda args: "0\n", "Darwin")  # native arm64
    preflight.refuse_rosetta(lambda args: None, "Darwin")  # an Intel Mac has no such sysctl
    preflight.refuse_rosetta(translated, "Linux")


ON_BATTERY = {"power_source": "battery", "low_power_mode": True, "thermal": "nominal"}
PLUGGED_IN = {"power_source": "ac", "low_power_mode": False, "thermal": "unknown"}


def test_it_says_so_before_starting_on_battery_and_asks() -> None:
    said: list[str] = []
    with pytest.raises(AgentError) as caught:
        preflight.confirm_power(ON_BATTERY, False, False, said.append, lambda question: True)
    assert caught.value.code == ExitCode.DECLINED and "--yes" in caught.value.message
    assert "runs on battery" in said[0] and "Low Power Mode" in said[0]
    with pytest.raises(AgentError):
        preflight.confirm_power(ON_BATTERY, False, True, said.append, lambda question: False)
    preflight.confirm_power(ON_BATTERY, False, True, said.append, lambda question: True)
    preflight.confirm_power(ON_BATTERY, True, False, said.append, lambda question: False)  # --yes answers
    said.clear()
    preflight.confirm_power(PLUGGED_IN, False, False, said.append, lambda question: False)
    assert said == []


def test_it_shows_control_characters_in_a_listing_as_codes_not_as_terminal_commands(
    server: HostileServer, tiny_source: Path
) -> None:
    """An escape sequence in a file name could clear the screen and hide the rest of the listing."""
    hidden = b"diff --git a/ok.c b/ok.c\n--- a/ok.c\n+++ b/\x1b[2J\x1b[Hok.c\n@@ -1 +1 @@\n-a\n+b\n"
    server.add_patch(1, "sneaky.patch", hidden)
    server.sign()
    answer = run_agent(server, tiny_source)
    assert answer.exit_code == ExitCode.UNTRUSTED
    assert "\x1b" not in answer.output and "\\x1b[2J\\x1b[Hok.c" in answer.output


def test_it_leaves_out_a_variant_the_server_lists_as_unavailable(server: HostileServer, tiny_source: Path) -> None:
    """The service lists a variant whose patch file it has not published yet with no URL (and the sha256
    its version signed): neither field is signed, and neither can make the variant run anything."""
    unpublished = server.manifest["variants"][2]
    unpublished.update(available=False, unavailable_reason="patch file 02-vectorized-bs1.patch is not published yet")
    unpublished["patches"][1].update(url=None)
    answer = run_agent(server, tiny_source)
    assert answer.exit_code == ExitCode.BUILD, answer.output  # past the manifest and the trust check
    assert "01+02" not in answer.output
