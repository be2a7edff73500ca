"""Round two of `benchhub-agent run` against a hostile server (issue 31), end to end through the CLI and a
real loopback server: the environment a manifest may set, the trust check on the whole manifest (also
for --variant runs), --trust-campaign with the manifest's digest, redirects, and the overall deadlines.

Against the agent before issue 31: LLAMA_ARG_* and path-naming GGML_* variables passed, a bundled
campaign plus one variable or another sweep ran without a listing under --yes, --variant runs skipped
the check, redirects to plain http on another host were followed, and a server trickling a byte at a
time held the agent for as long as it liked.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from benchhub_agent import client
from benchhub_agent.cli import main
from benchhub_agent.errors import ExitCode
from click.testing import CliRunner, Result

from tests.agent.loopback import SLUG, HostileServer, running
from tests.agent.test_hostile_server import GEMMA, assert_refused

# A name that never resolves (RFC 2606): the agent must refuse it before any lookup or connection.
ELSEWHERE = "http://benchhub.invalid"


@pytest.fixture
def hostile() -> Iterator[HostileServer]:
    with running() as server:
        yield server


@pytest.fixture
def tiny(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A CMake project with none of llama.cpp's targets: a run that gets past every check stops at its
    build with ExitCode.BUILD."""
    if not GEMMA.is_file():
        pytest.fail(f"{GEMMA} is missing: run `make fixtures` (scripts/fixtures.sh).")
    (tmp_path / "cwd").mkdir()
    monkeypatch.chdir(tmp_path / "cwd")
    tiny = tmp_path / "tiny-src"
    tiny.mkdir()
    (tiny / "CMakeLists.txt").write_text("cmake_minimum_required(VERSION 3.14)\nproject(tiny NONE)\n")
    return tiny


def run_agent(server: HostileServer, tiny: Path, *extra: str) -> Result:
    args = ["run", str(GEMMA), "--server", server.url, "--no-upload", "--backend", "cpu", "--llama-src", str(tiny)]
    return CliRunner().invoke(main, [*args, *extra])


def digest_of(answer: Result) -> str:
    return answer.output.split("manifest digest: ")[1].split()[0]


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("LLAMA_ARG_LOG_FILE", "~/.zshrc"),  # llama.cpp reads LLAMA_ARG_* as its options: a file written
        ("LLAMA_ARG_MODEL", "/tmp/other.gguf"),
        ("GGML_METAL_PATH_RESOURCES", "/tmp/evil"),  # a ggml variable that names a path
        ("GGML_CUDA_ENABLE_UNIFIED_MEMORY", "1"),  # a ggml variable, but not one the campaigns need
    ],
)
def test_it_passes_on_only_the_ggml_switches_the_campaigns_need(
    variable: str, value: str, hostile: HostileServer, tiny: Path
) -> None:
    hostile.manifest["variants"][2]["env"][variable] = value
    hostile.sign()  # past the signature (a stolen campaign key): the field checks still hold
    answer = run_agent(hostile, tiny, "--yes")
    assert_refused(answer, ExitCode.MANIFEST, "variants[2].env key", "not one of the ggml switches")


@pytest.mark.parametrize("value", ["/tmp/x.so", "https://example.com/x", "~/.zshrc", "a=b"])
def test_an_allowed_switch_takes_no_path_or_url(value: str, hostile: HostileServer, tiny: Path) -> None:
    hostile.manifest["variants"][2]["env"]["GGML_METAL_MV_IQ2_XXS_VEC"] = value
    hostile.sign()
    answer = run_agent(hostile, tiny, "--yes")
    assert_refused(answer, ExitCode.MANIFEST, "variants[2].env.GGML_METAL_MV_IQ2_XXS_VEC", "short plain value")


@pytest.mark.parametrize(
    ("change", "shown"),
    [
        (lambda manifest: manifest["variants"][1]["env"].update(GGML_METAL_MV_IQ2_XXS_VEC="1"), "env GGML_METAL_MV"),
        (lambda manifest: manifest["sweep"].update(batch_sizes=[1, 2]), "batch_sizes=[1, 2]"),
        (lambda manifest: manifest["sweep"].update(reps=20), "reps=20"),
        (lambda manifest: manifest.update(baseline="01"), "manifest digest"),
    ],
)
def test_any_difference_from_the_bundled_campaign_is_listed_and_not_run_even_under_yes(
    change: object, shown: str, hostile: HostileServer, tiny: Path, isolated_home: Path
) -> None:
    change(hostile.manifest)  # type: ignore[operator]
    unsigned = run_agent(hostile, tiny, "--yes")  # the server changed a signed field: refused before any prompt
    assert_refused(unsigned, ExitCode.SIGNATURE, "not signed by a campaign key this agent trusts")
    assert shown not in unsigned.output and "Build and run" not in unsigned.output
    hostile.sign()  # a version the campaign key signed but this agent does not bundle: shown and asked about
    answer = run_agent(hostile, tiny, "--yes")
    assert_refused(answer, ExitCode.UNTRUSTED, f"--trust-campaign {SLUG}@sha256:")
    assert shown in answer.output
    assert not (isolated_home / "cache" / "build").exists()


def test_the_manifest_digest_trusts_that_manifest_and_no_later_change(hostile: HostileServer, tiny: Path) -> None:
    hostile.manifest["variants"][1]["env"]["GGML_METAL_MV_IQ2_XXS_VEC"] = "1"
    hostile.sign()
    digest = digest_of(run_agent(hostile, tiny))
    trusted = run_agent(hostile, tiny, "--trust-campaign", digest)
    assert f"Trusted with --trust-campaign {digest}." in trusted.output
    assert trusted.exit_code == ExitCode.BUILD, trusted.output  # past every check, into the (tiny) build

    hostile.manifest["variants"][1]["env"]["GGML_METAL_MV_IQ2_XS_VEC"] = "1"  # one more switch
    hostile.sign()
    again = run_agent(hostile, tiny, "--trust-campaign", digest, "--yes")
    assert_refused(again, ExitCode.UNTRUSTED, "has changed since its digest was given")
    plain = run_agent(hostile, tiny, "--trust-campaign", SLUG, "--yes")
    assert_refused(plain, ExitCode.UNTRUSTED, "@sha256:")  # a slug alone trusts only the bundled copy
    odd = run_agent(hostile, tiny, "--trust-campaign", f"{SLUG}@md5:abc")
    assert_refused(odd, ExitCode.USAGE, "SLUG@sha256:DIGEST")


def prebuilt(tmp_path: Path) -> list[str]:
    """--variant folders of stand-in tools: the check must refuse before any of them runs."""
    ran = tmp_path / "a-tool-ran"
    args = []
    for name in ("upstream", "01+02"):
        folder = tmp_path / f"bin-{name}"
        folder.mkdir()
        for tool in ("llama-batched-bench", "test-backend-ops", "llama-completion"):
            (folder / tool).write_text(f"#!/bin/sh\ntouch '{ran}'\nexit 1\n")
            (folder / tool).chmod(0o755)
        args += ["--variant", f"{name}={folder}"]
    return args


def test_variant_runs_check_the_environment_and_sweep_they_take_from_the_server(
    hostile: HostileServer, tiny: Path, tmp_path: Path
) -> None:
    hostile.manifest["variants"][2]["env"]["GGML_METAL_MV_IQ2_XXS_VEC"] = "0"
    hostile.sign()
    args = ["run", str(GEMMA), "--server", hostile.url, "--no-upload", "--backend", "cpu", "--yes"]
    answer = CliRunner().invoke(main, [*args, *prebuilt(tmp_path)])
    assert_refused(answer, ExitCode.UNTRUSTED, "--trust-campaign")
    assert "your own binaries (--variant)" in answer.output and "env GGML_METAL_MV_IQ2_XXS_VEC=0" in answer.output
    assert not (tmp_path / "a-tool-ran").exists()


def test_a_redirect_to_plain_http_on_another_host_is_refused_before_it_is_followed(
    hostile: HostileServer, tiny: Path
) -> None:
    hostile.redirects[f"/api/v1/campaigns/{SLUG}/"] = f"{ELSEWHERE}/api/v1/campaigns/{SLUG}/"
    answer = run_agent(hostile, tiny)
    assert_refused(answer, ExitCode.MANIFEST, "redirected to", "plain http to another machine")


def test_a_patch_redirected_to_plain_http_on_another_host_is_refused(hostile: HostileServer, tiny: Path) -> None:
    name = "01-mv-ext-iquants.patch"
    hostile.redirects[f"/patches/{name}"] = f"{ELSEWHERE}/{name}"
    answer = run_agent(hostile, tiny)
    assert_refused(answer, ExitCode.MANIFEST, "redirected to", "benchhub.invalid")


def test_a_redirect_to_this_machine_is_followed(hostile: HostileServer, tiny: Path) -> None:
    for variant in hostile.manifest["variants"]:
        for patch in variant["patches"]:
            patch["url"] = patch["url"].replace("/patches/", "/moved/")
            moved = f"{hostile.url}/patches/{patch['name']}".replace("127.0.0.1", "localhost")
            hostile.redirects[f"/moved/{patch['name']}"] = moved
    answer = run_agent(hostile, tiny)
    assert answer.exit_code == ExitCode.BUILD, answer.output
    assert "/moved/01-mv-ext-iquants.patch" in hostile.requested
    assert "/patches/01-mv-ext-iquants.patch" in hostile.requested


def test_the_body_of_a_redirect_is_never_read(hostile: HostileServer, tiny: Path) -> None:
    """Its answer is capped; a redirect's body would otherwise be read whole, past every cap."""
    name = "01-mv-ext-iquants.patch"
    for variant in hostile.manifest["variants"]:
        for patch in variant["patches"]:
            if patch["name"] == name:
                patch["url"] = patch["url"].replace("/patches/", "/moved/")
    hostile.redirects[f"/moved/{name}"] = f"{hostile.url}/patches/{name}"
    hostile.heavy_redirects.add(f"/moved/{name}")
    answer = run_agent(hostile, tiny)
    assert answer.exit_code == ExitCode.BUILD, answer.output
    assert hostile.big_bytes_sent < 16 * 1024 * 1024  # what left the server sat in socket buffers


def test_a_server_that_trickles_its_answer_is_cut_off_at_the_request_deadline(
    hostile: HostileServer, tiny: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(client, "REQUEST_DEADLINE_S", 2.0, raising=False)
    hostile.trickled.add(f"/api/v1/campaigns/{SLUG}/")
    started = time.monotonic()
    answer = run_agent(hostile, tiny)
    assert time.monotonic() - started < 8
    assert_refused(answer, ExitCode.DEADLINE, "took longer than its 2 s deadline")


def test_a_campaign_whose_patches_each_come_in_time_is_cut_off_at_the_phase_deadline(
    hostile: HostileServer, tiny: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each patch within its own (raised) request deadline, the campaign's loading as a whole past its own."""
    monkeypatch.setattr(client, "CAMPAIGN_DEADLINE_S", 2.0, raising=False)
    hostile.trickled.add("/patches/01-mv-ext-iquants.patch")
    started = time.monotonic()
    answer = run_agent(hostile, tiny)
    assert time.monotonic() - started < 8
    assert_refused(answer, ExitCode.DEADLINE, "loading the campaign took longer than its 2 s deadline")


def test_the_deadline_exit_code_is_documented_in_the_help() -> None:
    answer = CliRunner().invoke(main, ["run", "--help"])
    assert "15  deadline" in answer.output and "SLUG@sha256:DIGEST" in answer.output
