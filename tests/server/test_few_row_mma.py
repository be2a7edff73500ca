"""The second campaign on the service: a variant that follows a git ref reports whatever commit the
agent resolved, every submission shows the commits it measured, cells group by variant name, and a
sweep run with other settings than its campaign's is stored and flagged but kept out of the cells."""

from __future__ import annotations

from typing import Any

import pytest
from benchhub_protocol import envelope
from django.test import Client
from django.urls import reverse

from benchhub.results.cells import refresh_submission_cells
from benchhub.results.models import LeaderboardCell, Measurement, Submission
from tests.conftest import Api, build_payload

MASTER = "836d57176dc699a726c55418e4f96b8ca628e1bf"
NAMES = {"upstream": "master-836d571", "01": "pr-29869"}

pytestmark = pytest.mark.django_db


def few_row_payload(pr_commit: str, pr_tg: float = 49.7, **sweep: Any) -> dict[str, Any]:
    """A few-row-mma result at batch sizes 1 and 4 (a subset of the campaign's), PR commit as given."""
    payload = build_payload(
        tg={"upstream": {1: [32.9, 32.9], 4: [36.3, 36.3]}, "01": {1: [32.9, 32.9], 4: [pr_tg] * 2}}
    )
    payload["campaign"] = "few-row-mma"
    for variant in payload["variants"]:
        variant["name"] = NAMES[variant["name"]]
        variant["commit"] = MASTER if variant["name"] == "master-836d571" else pr_commit
        variant["patches"] = []
    for entry in [*payload["sweep"]["runs"], *payload["correctness"], *payload["generation"]]:
        entry["variant"] = NAMES[entry["variant"]]
    payload["sweep"].update({"npp": 512, "ntg": 32, "n_ctx": 32768, "extra_args": ["-pps"], **sweep})
    return payload


def submit(api: Api, signer: envelope.Signer, payload: dict[str, Any]) -> Submission:
    response = api.submit(payload, signer)
    assert response.status_code == 201, response.json()
    refresh_submission_cells(response.json()["id"])
    return Submission.objects.get(pk=response.json()["id"])


def test_it_serves_the_few_row_mma_manifest_with_the_ref_unresolved(client: Client, campaign: Any) -> None:
    manifest = client.get("/api/v1/campaigns/few-row-mma/").json()
    assert manifest["baseline"] == "master-836d571"
    assert [(v["name"], v["commit"], v["ref"], v["available"]) for v in manifest["variants"]] == [
        ("master-836d571", MASTER, None, True),
        ("pr-29869", None, "refs/pull/29869/head", True),
    ]
    assert manifest["sweep"]["extra_args"] == ["-pps"] and manifest["sweep"]["n_ctx"] == 32768


def test_it_accepts_any_commit_of_the_ref_and_keys_its_cells_by_the_resolved_commit(
    api: Api, ada: envelope.Signer, personas: dict[str, envelope.Signer], client: Client
) -> None:
    assert api.register(personas["bob"], "bob").status_code == 201
    first = submit(api, ada, few_row_payload("a" * 40, pr_tg=70.0))
    second = submit(api, personas["bob"], few_row_payload("b" * 40, pr_tg=80.0))

    assert first.status == second.status == "accepted" and first.flags == second.flags == []
    assert {v.name: v.commit for v in second.variants.all()} == {"master-836d571": MASTER, "pr-29869": "b" * 40}
    found = LeaderboardCell.objects.filter(campaign__slug="few-row-mma", variant="pr-29869", batch_size=4)
    assert sorted(found.values_list("commit", "n_submissions", "tg_tps")) == [("a" * 40, 1, 70.0), ("b" * 40, 1, 80.0)]

    page = client.get(reverse("submission", args=[second.pk])).content.decode()
    assert f'title="{"b" * 40}"' in page and "following refs/pull/29869/head" in page
    assert "-pps" in page
    detail = client.get(f"/api/v1/submissions/{first.pk}/").json()
    assert {v["name"]: v["commit"] for v in detail["variants"]}["pr-29869"] == "a" * 40


def test_it_still_refuses_a_baseline_at_another_commit_than_the_pinned_one(api: Api, ada: envelope.Signer) -> None:
    payload = few_row_payload("a" * 40)
    payload["variants"][0]["commit"] = "c" * 40
    response = api.submit(payload, ada)
    assert response.status_code == 400
    assert (response.json()["error"], response.json()["field"]) == ("wrong_commit", "variants[0]")


@pytest.mark.parametrize(
    ("sweep", "difference"),
    [
        ({"npp": 128}, "npp 128 instead of 512"),
        ({"extra_args": []}, "switches [] instead of [-pps]"),
        ({"n_ctx": 4096}, "n_ctx 4096 instead of 32768"),
        ({"flash_attn": False}, "flash_attn False instead of True"),
    ],
)
def test_it_stores_a_sweep_with_other_settings_but_keeps_it_out_of_the_cells(
    api: Api, ada: envelope.Signer, client: Client, sweep: dict[str, Any], difference: str
) -> None:
    payload = few_row_payload("a" * 40, **sweep)
    if sweep.get("extra_args") == []:
        del payload["sweep"]["extra_args"]  # absent means none, as for a client that predates the field
    stored = submit(api, ada, payload)

    assert stored.status == "flagged" and stored.flags == ["nonstandard_sweep"]
    reasons = set(stored.measurements.values_list("excluded_reason", flat=True))
    assert reasons == {Measurement.Excluded.NONSTANDARD}
    assert not LeaderboardCell.objects.filter(campaign__slug="few-row-mma", n_machines__gt=0).exists()
    page = client.get(reverse("submission", args=[stored.pk])).content.decode()
    assert "Not in the leaderboard cells" in page and difference in page and "nonstandard sweep" in page


def test_it_flags_batch_sizes_outside_the_campaigns_but_not_a_subset(api: Api, ada: envelope.Signer) -> None:
    payload = build_payload(
        tg={"upstream": {4: [148.0, 148.0], 32: [300.0, 300.0]}, "01": {4: [209.9] * 2, 32: [310.0] * 2}}
    )
    stored = submit(api, ada, payload)
    assert stored.flags == ["nonstandard_sweep"]
    assert set(stored.measurements.values_list("excluded_reason", flat=True)) == {"nonstandard_sweep"}

    subset = submit(api, ada, build_payload(tg={"upstream": {4: [148.0, 148.0]}, "01": {4: [209.9, 210.1]}}))
    assert subset.flags == [] and set(subset.measurements.values_list("excluded_reason", flat=True)) == {""}
