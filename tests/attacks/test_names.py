"""Issue 30, point 6: a handle is exactly [A-Za-z0-9-] and reads as no other; a chip spelling owns
its slug, so one /chips/<slug>/ page and one API chip filter value mean one chip."""

from __future__ import annotations

import pytest

from benchhub.accounts.models import ChipName, ModerationEvent, PublicKey
from benchhub.results import moderation
from benchhub.results.models import Submission
from tests.attacks.conftest import Attacker, fresh_key
from tests.conftest import build_payload, persona

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_handle_with_a_trailing_newline_is_refused_not_a_500(attacker: Attacker) -> None:
    for handle in ("ada\n", "a" * 39 + "\n"):
        response = attacker.register(fresh_key(handle), handle)
        assert (response.status_code, response.json()["field"]) == (400, "handle"), handle


@pytest.mark.parametrize(
    ("first", "lookalike"),
    [("lab", "Iab"), ("lab", "1ab"), ("lab", "LAB"), ("mary", "rnary"), ("foo", "f00"), ("Ada-M", "ada-rn")],
)
def test_a_handle_that_reads_as_a_registered_one_is_refused(attacker: Attacker, first: str, lookalike: str) -> None:
    assert attacker.register(fresh_key(first), first).status_code == 201
    response = attacker.register(fresh_key(lookalike), lookalike)
    assert (response.status_code, response.json()["error"]) == (409, "handle_taken")
    assert first in response.json()["detail"]


def test_chip_spellings_that_share_a_slug_are_one_chip_never_a_hijack(attacker: Attacker) -> None:
    honest, other = persona("ada"), persona("bob")
    assert attacker.register(honest, "ada").status_code == 201
    assert attacker.register(other, "bob").status_code == 201
    assert attacker.submit(build_payload(machine={"chip": "Apple M2 Pro"}), honest).status_code == 201
    for spelling in ("Apple-M2-Pro", "APPLE M2 PRO", "apple m2 pro"):
        response = attacker.submit(build_payload(machine={"chip": spelling}), other)
        assert (response.status_code, response.json()["error"]) == (400, "chip_name_taken"), spelling
        assert "'Apple M2 Pro'" in response.json()["detail"]
    assert set(Submission.objects.values_list("chip", flat=True)) == {"Apple M2 Pro"}
    listed = attacker.get("/api/v1/submissions/", {"chip": "apple-m2-pro"}).json()["results"]
    assert {row["machine"]["chip"] for row in listed} == {"Apple M2 Pro"}


@pytest.mark.parametrize("chip", ["\u0410pple M2", "Apple M2 Pro 19c", "!!!"])
def test_a_chip_that_reads_as_another_or_takes_a_binning_slug_is_refused(attacker: Attacker, chip: str) -> None:
    key = persona("eve")
    assert attacker.register(key, "eve").status_code == 201
    response = attacker.submit(build_payload(machine={"chip": chip}), key)
    assert response.status_code == 400 and response.json()["field"] == "machine.chip", response.text
    assert not Submission.objects.exists()


def test_a_squatted_chip_spelling_is_released_once_its_key_is_retired(attacker: Attacker) -> None:
    """A registered key can claim a spelling before honest machines report the chip; a moderator
    retires the key and releases the spelling, and the honest spelling then owns the slug."""
    squatter, honest = fresh_key("squatter"), persona("ada")
    assert attacker.register(squatter, "squatter").status_code == 201
    assert attacker.register(honest, "ada").status_code == 201
    assert attacker.submit(build_payload(machine={"chip": "APPLE M6 PRO"}), squatter).status_code == 201
    refused = attacker.submit(build_payload(machine={"chip": "Apple M6 Pro"}), honest)
    assert (refused.status_code, refused.json()["error"]) == (400, "chip_name_taken")

    moderation.retire_keys(PublicKey.objects.filter(contributor__handle="squatter"), None, "squatting")  # type: ignore[arg-type]
    assert moderation.release_chip_names(ChipName.objects.filter(name="APPLE M6 PRO"), None, "squatting") == 1  # type: ignore[arg-type]
    assert attacker.submit(build_payload(machine={"chip": "Apple M6 Pro"}), honest).status_code == 201
    assert ModerationEvent.objects.filter(action="release_chip_name", target="APPLE M6 PRO").exists()
