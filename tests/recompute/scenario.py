"""A busy history sent through the real service, covering every rule of cells v3: random arrivals
from several keys (one handle with three machines, one key claiming two memory sizes), equal
values, every exclusion, a re-signed measurement refused with 409, a quarantine and its release, a
model conflict held and then resolved by three machines, a moderator's hide, a contributor's
withdrawal, a key on probation, a control page (CUDA rows on a Metal campaign), two versions of
few-row-mma pinning two commits of its PR (the first superseded) and two model files sharing a
display name. The live tests then ask the
standalone script whether it recomputes exactly the cells the service serves."""

from __future__ import annotations

import random
from datetime import timedelta
from typing import Any

from benchhub_protocol import envelope
from benchhub_protocol.payloads import signed_withdrawal
from django.contrib.auth.models import AnonymousUser
from django.utils import timezone

from benchhub.accounts.models import PublicKey
from benchhub.results import cells, moderation
from benchhub.results.models import Submission
from tests import versioning
from tests.conftest import Api, build_payload, persona

HANDLES = ("ada", "bob", "cole", "dina")
PROBATION_S = 3600  # the callers set BENCHHUB_KEY_PROBATION_S to this; eve's key stays pending
OTHER_FILE = "e" * 64  # a second model file whose label is the default file's (same display name)
DISPUTED = "f" * 64  # a file two claims disagree on
PR_COMMITS = ("1" * 40, "2" * 40)  # two resolved commits of few-row-mma's ref variant
MASTER = "836d57176dc699a726c55418e4f96b8ca628e1bf"
CUDA = {
    "os": "Linux",
    "arch": "x86_64",
    "chip": "AMD Ryzen 9 7950X",
    "gpu_name": "NVIDIA GeForce RTX 4090",
    "gpu_cores": None,
    "backend": "cuda",
    "low_power_mode": None,
}


def _payload(rng: random.Random, index: int) -> dict[str, Any]:
    baseline = rng.choice([100.0, 100.0, 120.0, 80.5])  # equal values on purpose
    ratios = [rng.choice([1.0, 1.25, 1.5, 1.5, 0.9]) for _ in range(3)]
    rounds = rng.choice([2, 2, 3])
    sizes = (1, 2, 4, 8)
    tg = {
        "upstream": {bs: [baseline + index * 0.01 + r for r in range(rounds)] for bs in sizes},
        "01": {bs: [(baseline + index * 0.01 + r) * ratios[r] for r in range(rounds)] for bs in sizes},
        "01+02": {bs: [(baseline + index * 0.01 + r) * ratios[-1 - r] for r in range(rounds)] for bs in sizes},
    }
    options: dict[str, Any] = {
        "tg": tg,
        "machine": {"chip": rng.choice(["Apple M5 Pro", "Apple M5 Pro", "Apple M1"])},
        "model": rng.choice([{}, {}, {"sha256": OTHER_FILE}]),
    }
    trouble = rng.choice(["none"] * 8 + ["fail", "not_run", "loop", "battery", "short"])
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


def few_row_mma(commit: str, ratio: float, digest: str | None = None) -> dict[str, Any]:
    """A few-row-mma run: the pinned master against the PR branch at `commit`, under the version of `digest`."""
    names = {"upstream": "master-836d571", "01": "pr-29869"}
    tg = {"upstream": {2: [100.0, 101.0], 4: [90.0, 91.0]}, "01": {2: [100 * ratio, 101 * ratio], 4: [90.0, 91.0]}}
    payload = build_payload(tg=tg)
    payload["campaign"] = "few-row-mma"
    payload["sweep"].update(npp=512, ntg=32, n_ctx=32768, extra_args=["-pps"])
    payload["variants"] = [
        {"name": names["upstream"], "commit": MASTER, "patches": [], "env": {}},
        {"name": names["01"], "commit": commit, "patches": [], "env": {}},
    ]
    for entry in (*payload["sweep"]["runs"], *payload["correctness"], *payload["generation"]):
        entry["variant"] = names[entry["variant"]]
    if digest is not None:
        payload["campaign_digest"] = digest
    return payload


def _submit(api: Api, payload: dict[str, Any], signer: envelope.Signer) -> str:
    response = api.submit(payload, signer)
    assert response.status_code == 201, response.json()
    return str(response.json()["id"])


def populate(api: Api, submissions: int = 40, seed: int = 7) -> None:
    rng = random.Random(seed)
    signers = {handle: persona(handle) for handle in HANDLES}
    for handle, signer in signers.items():
        assert api.register(signer, handle).status_code in (200, 201)
    # One handle, three machines: three keys.
    keys = [*signers.items(), *(("ada", api.another_machine(signers["ada"], "ada", n)) for n in (1, 2))]
    ids: list[tuple[str, envelope.Signer]] = []
    for index in range(submissions):
        handle, signer = rng.choice(keys)
        ids.append((_submit(api, _payload(rng, index), signer), signer))

    # Each exclusion once for sure, whatever the random draws gave.
    troubles = [{"correctness": {"01": "fail"}}, {"correctness": {"01": "not_run"}}, {"degenerate": {"01": True}}]
    troubles.append({"machine": {"power_source": "battery"}})
    for trouble in troubles:
        _submit(api, build_payload(tg={"upstream": {1: [90, 92]}, "01": {1: [99, 101]}}, **trouble), signers["dina"])

    # One key, two memory sizes: one machine.
    for memory in (16, 64):
        _submit(
            api,
            build_payload(
                tg={"upstream": {1: [90, 91]}, "01": {1: [99, 100]}}, machine={"memory_bytes": memory * 2**30}
            ),
            signers["bob"],
        )
    # The same measurement signed again, by another key: refused, it counts once.
    measured = build_payload(tg={"upstream": {1: [95, 96]}, "01": {1: [104, 105]}})
    _submit(api, measured, signers["cole"])
    again = api.submit({**measured, "nonce": "0" * 32}, signers["dina"])
    assert again.status_code == 409 and again.json()["error"] == "duplicate_measurement", again.json()

    # Quarantine (a ratio of 50), and another one released by a moderator.
    _submit(api, build_payload(tg={"upstream": {4: [100, 101]}, "01": {4: [5000, 5050]}}), signers["ada"])
    released = _submit(api, build_payload(tg={"upstream": {4: [97, 98]}, "01": {4: [2000, 2000]}}), signers["cole"])
    moderation.set_released(Submission.objects.filter(pk=released), True, AnonymousUser(), "checked")

    # A model conflict: two claims on one file are both held (no key has standing yet), until the
    # claim backed by more established networks stands (docs/protocol.md, model identity).
    odd = _submit(
        api,
        build_payload(
            tg={"upstream": {4: [99, 98]}, "01": {4: [150, 150]}}, model={"sha256": DISPUTED, "file_type": "Q8_0"}
        ),
        signers["bob"],
    )
    first = _submit(
        api,
        build_payload(tg={"upstream": {4: [99, 97]}, "01": {4: [120, 121]}}, model={"sha256": DISPUTED}),
        signers["ada"],
    )
    cells.refresh_all_cells()
    assert {str(pk) for pk in Submission.objects.filter(model_held=True).values_list("pk", flat=True)} >= {odd, first}
    for n, (_, signer) in enumerate(keys[1:3]):
        _submit(
            api,
            build_payload(tg={"upstream": {4: [98, 99]}, "01": {4: [118 + n, 119]}}, model={"sha256": DISPUTED}),
            signer,
        )

    # A control page: CUDA rows on a Metal campaign, from three machines.
    for n, (_, signer) in enumerate(keys[:3]):
        cuda = build_payload(
            tg={"upstream": {1: [150, 151], 4: [140, 141]}, "01": {1: [150 + n, 151], 4: [140, 141 + n]}}, machine=CUDA
        )
        for check in cuda["correctness"]:
            check["backend"] = "CUDA0"
        _submit(api, cuda, signer)

    # Two commits of the PR branch of few-row-mma, each pinned by a version of its own: the first
    # version's cells superseded by the second's, kept apart, never pooled.
    for n, commit in enumerate(PR_COMMITS):
        digest = versioning.publish("few-row-mma", versioning.pin(commit)).digest
        for _, signer in keys[n * 2 : n * 2 + 2]:
            _submit(api, few_row_mma(commit, 1.1 + n / 100, digest), signer)

    # A new key: its result is stored and shown, and counted in n_pending only.
    eve = persona("eve")
    assert api.register(eve, "eve").status_code == 201
    _submit(api, build_payload(tg={"upstream": {1: [100, 100]}, "01": {1: [130, 131]}}), eve)

    moderation.set_hidden(Submission.objects.filter(pk=ids[0][0]), True, AnonymousUser(), "spam")
    withdrawn, owner = ids[1]
    url = f"/api/v1/submissions/{withdrawn}/withdraw"
    assert api.post(url, signed_withdrawal(withdrawn, owner)).status_code == 200
    # Every key but eve's registered two hours ago: past probation (time cannot pass in a test).
    PublicKey.objects.exclude(keyid=eve.keyid).update(created_at=timezone.now() - timedelta(hours=2))
    for n, pk in enumerate(PublicKey.objects.order_by("pk").values_list("pk", flat=True)):  # a network each
        PublicKey.objects.filter(pk=pk).update(registered_network=f"198.18.{n}.0/24")
    cells.refresh_all_cells()
    assert Submission.objects.get(pk=odd).model_held and not Submission.objects.get(pk=first).model_held
