"""A busy history sent through the real service: random arrivals from several contributors and
machines, equal values, every exclusion, a quarantine and its release, a conflicting model
claim, a moderator's hide and a contributor's withdrawal. The live tests then ask the standalone
script whether it recomputes exactly the cells the service serves."""

from __future__ import annotations

import random
from typing import Any

from benchhub_protocol.payloads import signed_withdrawal
from django.contrib.auth.models import AnonymousUser

from benchhub.results import cells, moderation
from benchhub.results.models import Submission
from tests.conftest import Api, build_payload, persona

HANDLES = ("ada", "bob", "cole", "dina")


def _payload(rng: random.Random, index: int) -> dict[str, Any]:
    baseline = rng.choice([100.0, 100.0, 120.0, 80.5])  # equal values on purpose
    ratios = [rng.choice([1.0, 1.25, 1.5, 1.5, 0.9]) for _ in range(3)]
    rounds = rng.choice([2, 2, 3])
    tg = {
        "upstream": {bs: [baseline + index * 0.01 + r for r in range(rounds)] for bs in (1, 4)},
        "01": {bs: [(baseline + index * 0.01 + r) * ratios[r] for r in range(rounds)] for bs in (1, 4)},
        "01+02": {bs: [(baseline + index * 0.01 + r) * ratios[-1 - r] for r in range(rounds)] for bs in (1, 4)},
    }
    options: dict[str, Any] = {
        "tg": tg,
        "machine": {
            "chip": rng.choice(["Apple M5 Pro", "Apple M1"]),
            "memory_bytes": rng.choice([16, 24]) * 2**30,
        },
        "model": rng.choice([{}, {"sha256": "e" * 64, "file_type": "IQ3_XXS"}]),
    }
    trouble = rng.choice(["none"] * 6 + ["fail", "not_run", "loop", "battery", "short"])
    if trouble == "fail":
        options["correctness"] = {"01": "fail"}
    elif trouble == "not_run":
        options["correctness"] = {"01+02": "not_run"}
    elif trouble == "loop":
        options["degenerate"] = {"01": True}
    elif trouble == "battery":
        options["machine"]["power_source"] = "battery"
    payload = build_payload(**options)
    if trouble == "short":  # one round only: stored, never counted
        payload["sweep"]["runs"] = [run for run in payload["sweep"]["runs"] if run["rep"] == 1]
    return payload


def populate(api: Api, submissions: int = 40, seed: int = 7) -> None:
    rng = random.Random(seed)
    signers = {handle: persona(handle) for handle in HANDLES}
    for handle, signer in signers.items():
        assert api.register(signer, handle).status_code in (200, 201)
    ids: list[tuple[str, str]] = []
    for index in range(submissions):
        handle = rng.choice(HANDLES)
        response = api.submit(_payload(rng, index), signers[handle])
        assert response.status_code == 201, response.json()
        ids.append((response.json()["id"], handle))
    quarantined = api.submit(build_payload(tg={"upstream": {4: [100, 101]}, "01": {4: [5000, 5050]}}), signers["ada"])
    conflict = api.submit(
        build_payload(tg={"upstream": {4: [99, 98]}, "01": {4: [150, 150]}}, model={"file_type": "Q8_0"}),
        signers["bob"],
    )
    released = api.submit(build_payload(tg={"upstream": {4: [97, 98]}, "01": {4: [2000, 2000]}}), signers["cole"])
    for response in (quarantined, conflict, released):
        assert response.status_code == 201, response.json()
    moderation.set_released(Submission.objects.filter(pk=released.json()["id"]), True, AnonymousUser(), "checked")
    moderation.set_hidden(Submission.objects.filter(pk=ids[0][0]), True, AnonymousUser(), "spam")
    withdrawn, owner = ids[1]
    url = f"/api/v1/submissions/{withdrawn}/withdraw"
    assert api.post(url, signed_withdrawal(withdrawn, signers[owner])).status_code == 200
    cells.refresh_all_cells()
