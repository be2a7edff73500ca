"""Issue 30, point 1 (the agent's side): a key is one machine. A home directory copied to another
machine makes a new key there, says so in one sentence, and links it to the same handle with both
signatures (docs/protocol.md section 3)."""

from __future__ import annotations

from typing import Any

import pytest
from benchhub_agent import keys, outbox, result
from benchhub_agent.dirs import home
from click.testing import CliRunner

from benchhub.accounts.models import PublicKey
from tests.conftest import build_payload

M2_AIR = {"chip": "Apple M2", "gpu_cores": 8, "memory_bytes": 16 * 2**30}
M4_MAX = {"chip": "Apple M4 Max", "gpu_cores": 40, "memory_bytes": 64 * 2**30}


def test_the_same_hardware_keeps_its_key_and_other_hardware_gets_a_new_one() -> None:
    said: list[str] = []
    first = keys.for_machine(home(), M2_AIR, said.append)
    assert keys.for_machine(home(), {**M2_AIR, "os_version": "15.2"}, said.append).keyid == first.keyid
    assert said == []
    moved = keys.for_machine(home(), {**M2_AIR, "memory_bytes": 24 * 2**30}, said.append)
    assert moved.keyid != first.keyid and keys.load_or_create(home()).keyid == moved.keyid
    assert len(said) == 1 and said[0].count(". ") == 0 and "key of its own" in said[0]
    assert keys.previous_key(home(), first.keyid) is not None  # kept, to vouch for the new key


@pytest.mark.django_db(transaction=True)
def test_a_home_copied_to_another_mac_uploads_under_a_new_key_linked_to_the_same_handle(
    live_server: Any, campaign: Any
) -> None:
    from benchhub_agent.cli import main

    dirs = home()
    old = keys.for_machine(dirs, M2_AIR, print)
    outbox.put(dirs, "a" * 32, result.signed_bytes(build_payload(machine=M2_AIR), old))
    first = CliRunner().invoke(main, ["upload", "--server", live_server.url, "--handle", "mover"])
    assert first.exit_code == 0, first.output

    new = keys.for_machine(dirs, M4_MAX, print)  # the same home, now on an M4 Max
    assert new.keyid != old.keyid
    outbox.put(dirs, "b" * 32, result.signed_bytes(build_payload(machine=M4_MAX), new))
    second = CliRunner().invoke(main, ["upload", "--server", live_server.url])  # no --handle: it knows
    assert second.exit_code == 0, second.output
    assert "Linked this machine's new key" in second.output
    handles = dict(PublicKey.objects.values_list("keyid", "contributor__handle"))
    assert handles == {old.keyid: "mover", new.keyid: "mover"}
    assert keys.registered_handle(dirs, live_server.url, new.keyid) == "mover"
