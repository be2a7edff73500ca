"""Model identity (docs/protocol.md section 7): facts checked against each other, claims weighed by
established networks, a newcomer's conflict holding the newcomer, a moderator's pin, and the
bound for a mixture of experts. Over the test client; tests/attacks/test_model_identity.py
repeats the attacks over HTTP with probation on."""

from __future__ import annotations

import importlib
from datetime import timedelta
from typing import Any

import pytest
from benchhub_protocol import envelope
from django.contrib.auth.models import AnonymousUser
from django.utils import timezone

from benchhub.accounts import networks
from benchhub.accounts.models import ModerationEvent, PublicKey
from benchhub.results import cells, claims, moderation, tasks
from benchhub.results.models import FileStanding, LeaderboardCell, ModelFile, Submission
from tests.conftest import Api, build_payload, persona

pytestmark = pytest.mark.django_db

OTHER_SIZE = {"size_bytes": 700_000_001}
RENAMED = {"file_type": "Q4_K_M", "size_bytes": 690_000_000, "label": "Totally-different 1.7B Q4_K_M"}


def run(baseline: float, ratio: float) -> dict[str, dict[int, list[float]]]:
    return {"upstream": {4: [baseline, baseline]}, "01": {4: [baseline * ratio, baseline * ratio]}}


def machine_on(api: Api, name: str, network: str, days_old: float = 2.0) -> envelope.Signer:
    """A contributor's key registered from `network`, `days_old` days ago."""
    key = persona(name)
    assert api.register(key, name).status_code == 201
    PublicKey.objects.filter(keyid=key.keyid).update(
        registered_network=network, created_at=timezone.now() - timedelta(days=days_old)
    )
    return key


def submit(api: Api, key: envelope.Signer, n: int, ratio: float = 1.5, **options: Any) -> Submission:
    response = api.submit(build_payload(tg=run(100 + n, ratio), **options), key)
    assert response.status_code == 201, response.json()
    return Submission.objects.get(pk=response.json()["id"])


def refresh() -> None:
    cells.refresh_all_cells()


def cell(chip: str = "Apple M5 Pro") -> LeaderboardCell:
    return LeaderboardCell.objects.get(variant="01", batch_size=4, chip=chip)


@pytest.fixture
def probation(settings: Any) -> None:
    settings.BENCHHUB_KEY_PROBATION_S = 86400


@pytest.fixture
def honest(api: Api, campaign: Any, probation: None) -> list[Submission]:
    """Four established machines on four networks measured the file on an M5 Pro."""
    keys = [machine_on(api, f"honest-{n}", f"198.18.{n}.0/24") for n in range(4)]
    found = [submit(api, key, n) for n, key in enumerate(keys)]
    refresh()
    assert (cell().n_machines, cell().quant) == (4, "IQ2_XXS")
    return found


def test_a_fresh_key_with_another_size_is_held_and_the_established_cells_stand(
    api: Api, honest: list[Submission]
) -> None:
    before = (cell().verdict, cell().speedup, cell().model, cell().quant)
    newcomer = machine_on(api, "newcomer", "203.0.113.0/24", days_old=0)
    liar = submit(api, newcomer, 9, ratio=9.0, model=OTHER_SIZE)
    refresh()
    assert (cell().n_machines, cell().excluded["held"]) == (4, 1)
    assert (cell().verdict, cell().speedup, cell().model, cell().quant) == before
    assert Submission.objects.get(pk=liar.pk).held_back[-1] == "model_conflict"
    assert not Submission.objects.filter(pk__in=[row.pk for row in honest], model_held=True).exists()


def test_a_conflict_on_another_chip_holds_only_the_newcomer(api: Api, honest: list[Submission]) -> None:
    newcomer = machine_on(api, "m1", "203.0.113.0/24", days_old=0)
    liar = submit(api, newcomer, 9, model=OTHER_SIZE, machine={"chip": "Apple M1"})
    refresh()
    assert cell().n_machines == 4
    assert Submission.objects.get(pk=liar.pk).model_held


def test_three_keys_of_one_network_weigh_one_and_a_tie_keeps_the_incumbent(
    api: Api, campaign: Any, probation: None
) -> None:
    honest = submit(api, machine_on(api, "solo", "198.18.7.0/24", days_old=3), 1)
    refresh()
    sybils = [machine_on(api, f"sybil-{n}", "203.0.113.0/24") for n in range(3)]
    for n, key in enumerate(sybils):
        submit(api, key, 10 + n, ratio=0.8, model=RENAMED)
    refresh()
    found = claims.standing(honest.model_sha256)
    assert [claim.weight for claim in found.claims.values()] == [1, 1]
    assert found.established == honest.model_file.facts_digest
    assert (cell().n_machines, cell().quant, cell().model) == (1, "IQ2_XXS", "Qwen3-1.7B UD-IQ2_XXS")
    assert Submission.objects.filter(model_held=True).count() == 3


def test_the_honest_majority_of_networks_keeps_its_cells_and_the_file_shows_as_disputed(
    api: Api, honest: list[Submission]
) -> None:
    corrupted = submit(api, machine_on(api, "corrupt", "198.18.99.0/24"), 9, model=OTHER_SIZE)
    refresh()
    found = claims.standing(corrupted.model_sha256)
    assert found.disputed and found.established == honest[0].model_file.facts_digest
    assert sorted(claim.weight for claim in found.claims.values()) == [1, 4]
    assert cell().n_machines == 4 and Submission.objects.get(pk=corrupted.pk).model_held
    assert claims.disputed_files() == [corrupted.model_sha256]


def test_with_no_claim_standing_every_claim_of_a_disputed_file_waits(api: Api, campaign: Any, probation: None) -> None:
    first = submit(api, machine_on(api, "early", "198.18.1.0/24", days_old=0), 1)
    refresh()
    assert not Submission.objects.get(pk=first.pk).model_held, "one claim alone is no conflict"
    second = submit(api, machine_on(api, "other", "198.18.2.0/24", days_old=0), 2, model=OTHER_SIZE)
    refresh()
    assert Submission.objects.filter(pk__in=[first.pk, second.pk], model_held=True).count() == 2
    PublicKey.objects.update(created_at=timezone.now() - timedelta(days=2))  # both leave probation
    refresh()
    assert claims.standing(first.model_sha256).established == first.model_file.facts_digest, "the earlier one"
    assert not Submission.objects.get(pk=first.pk).model_held and Submission.objects.get(pk=second.pk).model_held


def test_a_key_with_a_quarantined_row_for_the_file_has_no_standing(api: Api, campaign: Any, probation: None) -> None:
    key = machine_on(api, "wild", "198.18.5.0/24")
    submit(api, key, 1, ratio=9.0)  # outside the plausible range: quarantined
    submit(api, key, 2)
    assert claims.standing(build_payload()["model"]["sha256"]).claims.popitem()[1].weight == 0


def test_a_moderator_pins_a_claim_and_a_name_audited(api: Api, honest: list[Submission]) -> None:
    other = submit(api, machine_on(api, "right", "198.18.50.0/24"), 9, ratio=1.6, model=OTHER_SIZE)
    moderation.pin_claim(other.model_file, AnonymousUser(), "the header says so", name="Qwen3 1.7B (pinned)")
    refresh()
    assert (cell().n_machines, cell().excluded["held"], cell().model) == (1, 4, "Qwen3 1.7B (pinned)")
    assert ModerationEvent.objects.filter(action="decide_model_claim", target=other.model_sha256).exists()
    assert moderation.unpin_claim(other.model_sha256, AnonymousUser(), "mistake")
    refresh()
    assert (cell().n_machines, cell().excluded["held"]) == (4, 1)
    assert ModerationEvent.objects.filter(action="unpin_model_claim").count() == 1


def test_a_withdrawal_of_the_conflicting_claim_lifts_the_hold(api: Api, campaign: Any, probation: None) -> None:
    submit(api, machine_on(api, "a", "198.18.1.0/24"), 1)
    wrong = submit(api, machine_on(api, "b", "198.18.2.0/24"), 2, model=OTHER_SIZE)
    refresh()
    assert Submission.objects.get(pk=wrong.pk).model_held, "one network each: the earlier claim stands"
    moderation.withdraw(wrong, b"{}")
    refresh()
    assert not Submission.objects.filter(model_held=True).exists()
    assert cell().n_machines == 1


def test_a_change_of_standing_requeues_the_files_groups_once(
    api: Api, honest: list[Submission], monkeypatch: pytest.MonkeyPatch
) -> None:
    queued: list[tuple[Any, ...]] = []
    monkeypatch.setattr(tasks.refresh_group_cells, "delay", lambda *args, **kw: queued.append((*args, kw)))
    submit(api, machine_on(api, "m1-honest", "198.18.40.0/24"), 7, machine={"chip": "Apple M1"})
    refresh()
    assert tasks.settle_claims(honest[0].model_sha256) == 0, "one claim: nothing to settle"
    pinned = submit(api, machine_on(api, "pin", "198.18.41.0/24"), 8, model=OTHER_SIZE)
    refresh()
    queued.clear()
    moderation.pin_claim(pinned.model_file, AnonymousUser(), "test")
    tasks.settle_claims(pinned.model_sha256, changed=True)
    assert sorted(args[1] for args in queued) == ["Apple M1", "Apple M5 Pro"]
    assert all(args[-2:] == (True, {}) for args in queued), "forced: nothing of theirs is waiting"
    queued.clear()
    for group in cells.all_groups():
        cells.refresh_group(group)
    assert tasks.settle_claims(pinned.model_sha256) == 0, "every group has seen the new standing"
    assert FileStanding.objects.get(sha256=pinned.model_sha256).established == pinned.model_file.facts_digest


@pytest.mark.parametrize(
    ("model", "field"),
    [
        ({"size_bytes": 600_000_000}, "model.size_bytes"),
        ({"size_bytes": 651_000_000 + 65 * 2**20}, "model.size_bytes"),
        ({"n_params": 10}, "model.n_params"),
        ({"file_type": "Q8_0", "tensor_bytes_by_type": {"F32": 1_000_000, "IQ2_XXS": 650_000_000}}, "model.file_type"),
        ({"tensor_bytes_by_type": {"F32": 0}}, "model.tensor_bytes_by_type"),
        ({"expert_count": 128}, "model.expert_used_count"),
        ({"expert_count": 8, "expert_used_count": 9}, "model.expert_used_count"),
    ],
)
def test_facts_that_contradict_each_other_are_refused_naming_the_field(
    api: Api, ada: envelope.Signer, model: dict[str, Any], field: str
) -> None:
    response = api.submit(build_payload(model=model), ada)
    assert (response.status_code, response.json()["error"], response.json()["field"]) == (
        400,
        "model_facts_contradict",
        field,
    )
    assert not Submission.objects.exists()


MOE = {
    "file_name": "Qwen3-30B-A3B-Q4_K_M.gguf",
    "label": "Qwen3-30B-A3B Q4_K_M",
    "architecture": "qwen3moe",
    "n_params": 30_532_122_624,
    "file_type": "Q4_K_M",
    "size_bytes": 18_556_686_400,
    "tensor_bytes_by_type": {"F32": 200_000_000, "Q4_K": 15_000_000_000, "Q6_K": 3_350_000_000},
    "expert_count": 128,
    "expert_used_count": 8,
}


def test_a_mixture_of_experts_at_a_real_speed_counts_and_an_impossible_one_does_not(
    api: Api, ada: envelope.Signer
) -> None:
    machine = {"chip": "Apple M4 Max"}
    at_70 = {"upstream": {1: [70.0, 70.0]}, "01": {1: [73.5, 73.4]}}  # batch size 1: a decode step per token
    real = api.submit(build_payload(tg=at_70, model=MOE, machine=machine), ada).json()
    assert real["status"] == "accepted", real
    dense = {**MOE, "sha256": "c" * 64}
    dense.pop("expert_count"), dense.pop("expert_used_count")
    bound = api.submit(build_payload(tg=at_70, model=dense, machine=machine), ada).json()
    assert "quarantined" in Submission.objects.get(pk=bound["id"]).flags, "dense at 70 t/s: beyond 546 GB/s"
    absurd = {"upstream": {1: [5e6, 5e6]}, "01": {1: [5e6, 5.1e6]}}
    absurd = api.submit(build_payload(tg=absurd, model=MOE, machine=machine), ada).json()
    assert "quarantined" in Submission.objects.get(pk=absurd["id"]).flags


def test_a_copy_nudged_by_a_hundredth_is_one_measurement_under_any_key(api: Api, ada: envelope.Signer) -> None:
    payload = build_payload()
    stored = api.submit(payload, ada).json()["id"]
    nudged = {**payload, "nonce": "f" * 32}
    runs = [dict(run, rows=[dict(row) for row in run["rows"]]) for run in payload["sweep"]["runs"]]
    runs[0]["rows"][0]["tg_tps"] += 0.01
    nudged["sweep"] = {**payload["sweep"], "runs": runs}
    thief = machine_on(api, "thief", "203.0.113.0/24")
    response = api.submit(nudged, thief)
    assert (response.status_code, response.json()["error"], response.json()["submission"]) == (
        409,
        "duplicate_measurement",
        stored,
    )
    runs[0]["rows"][0]["tg_tps"] *= 1.02  # beyond the tolerance: another measurement
    assert api.submit(nudged, thief).status_code == 201


def test_a_network_search_matches_networks_not_text() -> None:
    wanted = networks.search_network("10.1.1")
    assert wanted is not None and str(wanted) == "10.1.1.0/24"
    assert networks.inside("10.1.1.0/24", wanted) and not networks.inside("110.1.1.0/24", wanted)
    assert networks.search_network("ada") is None
    v6 = networks.search_network("2001:db8::/48")
    assert v6 is not None and networks.inside("2001:db8:0:7::/64", v6)


def test_the_admin_search_finds_a_networks_keys_only(api: Api, campaign: Any, admin_client: Any) -> None:
    machine_on(api, "near", "10.1.1.0/24")
    machine_on(api, "far", "110.1.1.0/24")
    page = admin_client.get("/admin/accounts/publickey/", {"q": "10.1.1"}).content.decode()
    assert "near" in page and "far" not in page


def test_the_admin_lists_claims_with_their_standing(api: Api, honest: list[Submission], admin_client: Any) -> None:
    submit(api, machine_on(api, "newcomer", "203.0.113.0/24", days_old=0), 9, model=OTHER_SIZE)
    page = admin_client.get("/admin/results/modelfile/", {"disputed": "yes"}).content.decode()
    assert "stands, disputed" in page and "held" in page and "198.18.0.0/24" in page
    assert ModelFile.objects.filter(sha256=honest[0].model_sha256).count() == 2


def test_rows_stored_before_their_values_were_kept_are_filled_and_still_caught(api: Api, ada: envelope.Signer) -> None:
    """Migration 0010 fills measured_values from each raw envelope; a near copy of such a row is refused."""
    from django.apps import apps

    fill = importlib.import_module("benchhub.results.migrations.0010_measured_values").fill_values
    payload = build_payload()
    stored = api.submit(payload, ada).json()["id"]
    expected = Submission.objects.get(pk=stored).measured_values
    assert expected and len(expected) == 2 * sum(len(run["rows"]) for run in payload["sweep"]["runs"])
    Submission.objects.filter(pk=stored).update(measured_values=None)  # as a row stored before 0010
    fill(apps, None)
    assert Submission.objects.get(pk=stored).measured_values == expected
    runs = [dict(run, rows=[dict(row) for row in run["rows"]]) for run in payload["sweep"]["runs"]]
    runs[-1]["rows"][-1]["pp_tps"] *= 1.004  # within 0.5%
    nudged = {**payload, "nonce": "e" * 32, "sweep": {**payload["sweep"], "runs": runs}}
    response = api.submit(nudged, machine_on(api, "thief", "203.0.113.0/24"))
    assert (response.status_code, response.json()["submission"]) == (409, stored)
