"""The second campaign on the service: its PR variant ships as a draft until a moderator pins a commit
in a signed version; a later version pinning another commit supersedes the older cells (kept apart,
never ranked); and a sweep run with other settings than its campaign's is stored and flagged but
kept out of the cells."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from benchhub_protocol import campaign_versions, envelope
from django.test import Client
from django.urls import reverse

from benchhub.results.cells import refresh_submission_cells
from benchhub.results.models import Headline, LeaderboardCell, Measurement, Submission
from tests import versioning
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


def test_it_serves_few_row_mma_as_a_draft_until_a_moderator_pins_the_pr(
    client: Client, api: Api, ada: envelope.Signer
) -> None:
    manifest = client.get("/api/v1/campaigns/few-row-mma/").json()
    assert (manifest["version"], manifest["state"], manifest["signature"]) == (1, "draft", None)
    assert manifest["baseline"] == "master-836d571"
    assert [(v["name"], v["commit"], v["ref"]) for v in manifest["variants"]] == [
        ("master-836d571", MASTER, None),
        ("pr-29869", None, "refs/pull/29869/head"),
    ]
    assert manifest["sweep"]["extra_args"] == ["-pps"] and manifest["sweep"]["n_ctx"] == 32768
    refused = api.submit(few_row_payload("a" * 40), ada)
    assert (refused.status_code, refused.json()["error"], refused.json()["field"]) == (
        400,
        "campaign_not_open",
        "campaign",
    )

    versioning.publish("few-row-mma", versioning.pin("a" * 40))
    pinned = client.get("/api/v1/campaigns/few-row-mma/").json()
    assert (pinned["version"], pinned["state"], pinned["variants"][1]["commit"]) == (2, "open", "a" * 40)
    assert campaign_versions.verify(pinned, campaign_versions.trusted_keys()) == versioning.DEV_CAMPAIGN_KEY.keyid


def test_a_new_version_with_another_commit_leaves_the_old_cells_superseded_apart_and_unranked(
    api: Api, ada: envelope.Signer, personas: dict[str, envelope.Signer], client: Client
) -> None:
    assert api.register(personas["bob"], "bob").status_code == 201
    first = versioning.publish("few-row-mma", versioning.pin("a" * 40))
    old = submit(api, ada, few_row_payload("a" * 40, pr_tg=70.0))
    second = versioning.publish("few-row-mma", versioning.pin("b" * 40))
    assert second.changes == [f"variant pr-29869 commit: {'a' * 40} -> {'b' * 40}"]
    now = few_row_payload("a" * 40, pr_tg=71.0)
    now["created_at"] = (datetime.now(UTC) + timedelta(seconds=2)).strftime("%Y-%m-%dT%H:%M:%SZ")
    refused = api.submit(now, personas["bob"])  # no digest: judged by the version open at its created_at
    assert (refused.status_code, refused.json()["error"]) == (400, "wrong_commit")
    late = few_row_payload("a" * 40, pr_tg=72.0)
    late["campaign_digest"] = first.digest  # ran under the older version: judged by it, shown with it
    assert submit(api, personas["bob"], late).campaign_version == 2
    new = few_row_payload("b" * 40, pr_tg=80.0)
    new["campaign_digest"] = second.digest
    assert submit(api, ada, new).campaign_version == 3
    assert (old.ran_under_id, old.campaign_version) == (first.pk, 2)

    rows = client.get("/api/v1/leaderboard/", {"campaign": "few-row-mma"}).json()["rows"]
    found = {
        (r["commit"], r["campaign_version"], r["superseded"], r["n_submissions"])
        for r in rows
        if r["variant"] == "pr-29869" and r["batch_size"] == 4
    }
    assert found == {("a" * 40, 2, True, 2), ("b" * 40, 3, False, 1)}  # kept, apart, never pooled
    headlines = Headline.objects.filter(campaign__slug="few-row-mma", variant="pr-29869")
    assert sorted(headlines.values_list("commit", "superseded")) == [("a" * 40, True), ("b" * 40, False)]
    home = client.get("/", {"campaign": "few-row-mma"}).content.decode()
    assert "b" * 12 in home and "a" * 12 not in home  # the ranking reads the open version's cells only
    page = client.get(reverse("campaign", args=["few-row-mma"])).content.decode()
    assert "Superseded cells of version 2" in page and f"variant pr-29869 commit: {'a' * 40} -&gt; {'b' * 40}" in page
    listed = client.get("/api/v1/campaigns/few-row-mma/versions/").json()
    assert [(v["version"], v["state"], v["campaign_version"]) for v in listed] == [
        (1, "draft", 1),
        (2, "superseded", 2),
        (3, "open", 3),
    ]


def test_it_still_refuses_a_baseline_at_another_commit_than_the_pinned_one(api: Api, ada: envelope.Signer) -> None:
    versioning.publish("few-row-mma", versioning.pin("a" * 40))
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
    versioning.publish("few-row-mma", versioning.pin("a" * 40))
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
