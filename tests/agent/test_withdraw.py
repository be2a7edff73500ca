"""`benchhub-agent withdraw ID` against a loopback stub of the server's withdraw endpoint, which checks
the envelope as the server does: a withdrawal payload signed by the key that signed the submission."""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from benchhub_agent import keys
from benchhub_agent.cli import main
from benchhub_agent.dirs import home
from benchhub_agent.errors import ExitCode
from benchhub_protocol.envelope import (
    WITHDRAWAL_TYPE,
    EnvelopeError,
    Signer,
    open_envelope,
    parse_canonical_payload,
    strict_loads,
    verify_signature,
)
from click.testing import CliRunner, Result

from tests.agent.loopback import HostileServer, running

MINE = str(uuid.uuid4())
THEIRS = str(uuid.uuid4())
RFC3339_UTC = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ")


def stub_withdraw(owners: dict[str, Signer], submission: str) -> Any:
    def answer(body: bytes) -> tuple[int, dict[str, Any]]:
        if submission not in owners:
            return 404, {"error": "not_found", "detail": "No such submission."}
        try:
            opened = open_envelope(strict_loads(body), WITHDRAWAL_TYPE)
        except EnvelopeError as error:
            return 400, {"error": "bad_envelope", "detail": error.detail}
        owner = owners[submission]
        if opened.keyids != (owner.keyid,):
            return 403, {"error": "not_your_submission", "detail": "Signed by another key."}
        if not verify_signature(opened, owner.keyid, owner.public_key):
            return 401, {"error": "bad_signature", "detail": "The signature does not verify."}
        payload = parse_canonical_payload(opened.payload)
        assert set(payload) == {"schema_version", "submission", "created_at"}
        assert payload["schema_version"] == 1 and payload["submission"] == submission
        assert RFC3339_UTC.fullmatch(payload["created_at"])
        return 200, {"id": submission, "status": "withdrawn", "withdrawn_at": "2026-12-03T10:00:00Z"}

    return answer


@pytest.fixture
def server() -> Iterator[HostileServer]:
    with running() as serving:
        owners = {MINE: keys.load_or_create(home()), THEIRS: Signer.generate()}
        for submission in (MINE, THEIRS, str(uuid.UUID(int=0))):
            serving.posts[f"/api/v1/submissions/{submission}/withdraw"] = stub_withdraw(owners, submission)
        yield serving


def withdraw(server: HostileServer, submission: str) -> Result:
    return CliRunner().invoke(main, ["withdraw", submission, "--server", server.url])


def test_it_withdraws_a_result_this_key_signed(server: HostileServer) -> None:
    answer = withdraw(server, MINE.upper())  # any spelling of the UUID; the canonical one is sent
    assert answer.exit_code == 0, answer.output
    assert answer.output == f"Withdrawn: {MINE} (2026-12-03T10:00:00Z).\n"
    path, body = server.received[-1]
    assert path == f"/api/v1/submissions/{MINE}/withdraw"
    assert json.loads(body)["payloadType"] == WITHDRAWAL_TYPE


def test_it_says_in_one_sentence_that_another_key_signed_it(server: HostileServer) -> None:
    answer = withdraw(server, THEIRS)
    assert answer.exit_code == ExitCode.UPLOAD
    assert answer.output == (
        f"benchhub-agent: {server.url} did not withdraw {THEIRS}: it was signed by another key than this machine's.\n"
    )


def test_it_says_the_server_has_no_such_submission(server: HostileServer) -> None:
    answer = withdraw(server, str(uuid.UUID(int=0)))
    assert answer.exit_code == ExitCode.UPLOAD and "the server has no such submission." in answer.output


def test_it_sends_nothing_for_an_id_that_is_not_a_uuid(server: HostileServer) -> None:
    answer = withdraw(server, "../contributors/")
    assert answer.exit_code == ExitCode.USAGE and "is not a submission id" in answer.output
    assert server.received == []


def test_it_has_nothing_to_withdraw_without_a_key(server: HostileServer, isolated_home: Any) -> None:
    keys.key_path(home()).unlink()
    answer = withdraw(server, MINE)
    assert answer.exit_code == ExitCode.USAGE and "no key yet" in answer.output
    assert not keys.key_path(home()).exists() and server.received == []
