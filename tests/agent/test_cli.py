from __future__ import annotations

import json
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from benchhub_agent import keys, outbox, result
from benchhub_agent.cli import main
from benchhub_agent.dirs import home
from benchhub_agent.errors import ExitCode
from benchhub_protocol import schema
from click.testing import CliRunner

from tests.conftest import build_payload


def invoke(*args: str, input_text: str | None = None) -> Any:
    return CliRunner().invoke(main, list(args), input=input_text, catch_exceptions=False)


def signed_result(tmp_path: Path) -> Path:
    path = tmp_path / "result.json"
    path.write_bytes(result.signed_bytes(build_payload(), keys.load_or_create(home())))
    return path


def test_it_puts_every_file_under_benchhub_home(isolated_home: Path) -> None:
    answer = invoke("dirs")
    assert answer.exit_code == 0
    for line in answer.output.splitlines():
        assert line.split()[1].startswith(str(isolated_home))


def test_it_creates_the_key_once_readable_only_by_its_owner(isolated_home: Path) -> None:
    first = invoke("key")
    second = invoke("key")
    assert first.exit_code == 0 and first.output == second.output
    path = keys.key_path(home())
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert keys.read_key(path).keyid in first.output


def test_it_refuses_a_file_that_is_not_a_model_before_building_anything(tmp_path: Path, isolated_home: Path) -> None:
    fake = tmp_path / "model.gguf"
    fake.write_text("hello")
    answer = CliRunner().invoke(main, ["run", str(fake), "--no-upload"])
    assert answer.exit_code == ExitCode.BAD_MODEL
    assert "not a GGUF file" in answer.output
    assert not (isolated_home / "cache" / "build").exists()


def test_it_asks_for_a_server_unless_told_to_keep_the_result_local(tmp_path: Path) -> None:
    answer = CliRunner().invoke(main, ["run", str(tmp_path / "m.gguf")])
    assert answer.exit_code == ExitCode.USAGE
    assert "--no-upload" in answer.output


def test_it_rejects_a_malformed_batch_size_list(tmp_path: Path) -> None:
    answer = CliRunner().invoke(main, ["run", str(tmp_path / "m.gguf"), "--batch-sizes", "1,x", "--no-upload"])
    assert answer.exit_code == ExitCode.USAGE


def test_it_verifies_a_signed_result_and_rejects_a_tampered_one(tmp_path: Path) -> None:
    path = signed_result(tmp_path)
    answer = invoke("verify", str(path))
    assert answer.exit_code == 0 and answer.output.startswith("OK: signed by")
    envelope = json.loads(path.read_bytes())
    envelope["payload"] = envelope["payload"][:-8] + ("A" * 8 if envelope["payload"][-8:] != "A" * 8 else "B" * 8)
    path.write_text(json.dumps(envelope))
    tampered = CliRunner().invoke(main, ["verify", str(path)])
    assert tampered.exit_code == ExitCode.VERIFY


def test_it_says_the_outbox_is_empty(tmp_path: Path) -> None:
    answer = invoke("upload", "--server", "http://127.0.0.1:9")
    assert answer.exit_code == 0 and "empty" in answer.output


@pytest.mark.django_db(transaction=True)
def test_it_registers_then_uploads_the_outbox_to_a_live_server(live_server: Any, campaign: Any) -> None:
    dirs = home()
    signer = keys.load_or_create(dirs)
    payload = build_payload()
    queued = outbox.put(dirs, payload["nonce"], result.signed_bytes(payload, signer))
    answer = invoke("upload", "--server", live_server.url, "--handle", "cli-tester")
    assert answer.exit_code == 0, answer.output
    assert "accepted" in answer.output and f"{live_server.url}/submissions/" in answer.output
    assert not queued.exists()
    assert keys.registered_handle(dirs, live_server.url, signer.keyid) == "cli-tester"


@pytest.mark.django_db(transaction=True)
def test_it_keeps_a_refused_result_in_the_outbox_and_names_the_field(live_server: Any, campaign: Any) -> None:
    dirs = home()
    payload = build_payload()
    payload["variants"][1]["patches"][0]["sha256"] = "0" * 64  # not the campaign's patch
    queued = outbox.put(dirs, payload["nonce"], result.signed_bytes(payload, keys.load_or_create(dirs)))
    answer = CliRunner().invoke(main, ["upload", "--server", live_server.url, "--handle", "cli-tester"])
    assert answer.exit_code == ExitCode.UPLOAD
    assert "HTTP 400" in answer.output and "variants" in answer.output
    assert queued.exists()


def test_it_lists_what_a_run_needs_with_a_fix_for_each_missing_piece() -> None:
    answer = CliRunner().invoke(main, ["doctor", "--backend", "cpu"])
    assert answer.exit_code in (ExitCode.OK, ExitCode.MISSING_TOOL)
    assert "[ok ] git:" in answer.output and "[ok ] cmake >= 3.18:" in answer.output
    assert "disk space" in answer.output and "power" in answer.output
    for line in answer.output.splitlines():
        if line.startswith("[FIX]"):
            assert "fix:" in answer.output


def test_it_turns_a_bug_into_one_sentence_and_a_crash_log(monkeypatch: pytest.MonkeyPatch) -> None:
    from benchhub_agent import cli

    def broken(*args: object) -> None:
        raise RuntimeError("boom")

    monkeypatch.setattr(cli.doctor, "checks", broken)
    answer = CliRunner().invoke(main, ["doctor"])
    assert answer.exit_code == ExitCode.FAILURE
    assert "unexpected RuntimeError: boom" in answer.output and "Traceback" not in answer.output
    assert "RuntimeError: boom" in (home().data / "crash.log").read_text()


def test_it_starts_without_the_imports_it_does_not_need_on_a_run() -> None:
    """numpy (gguf's reader, which the agent does not use) and jsonschema (which only words a refusal)
    were half of the agent's 0.6 s start-up (issue 6, target 6)."""
    script = "import sys, benchhub_agent.cli; print(sorted({'numpy', 'jsonschema'} & set(sys.modules)))"
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def test_it_still_words_a_refusal_with_the_field_at_fault() -> None:
    payload = build_payload()
    payload["sweep"]["batch_sizes"] = "1,2"
    with pytest.raises(schema.SchemaViolation) as caught:
        schema.validate_submission(payload)
    assert caught.value.field == "sweep.batch_sizes"
