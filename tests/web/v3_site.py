"""A small site for cells v3's reader-facing rules, built through the real signed ingest and cell
refresh: two keys on one Apple chip that each measured a different batch size, a second model
file sharing the first one's display name, and a CUDA row (a control: the campaign's patches touch
Metal only).

The verdict statistics are another module's (benchhub_protocol.stats); where a test needs a v3
verdict the interim statistics cannot give yet ("within", a page-wise interval, a prediction), it
writes those facts onto the stored cell with `judge`, moving updated_at as a refresh does so the
page caches see a new version."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from benchhub_protocol import envelope
from django.utils import timezone

from benchhub.results.cells import refresh_submission_cells
from benchhub.results.models import LeaderboardCell, Submission
from tests.conftest import Api, build_payload

IQ2_SHA, TWIN_SHA = "b" * 64, "c" * 64
LABEL = "Qwen3-1.7B UD-IQ2_XXS"
H200 = {"backend": "cuda", "chip": "NVIDIA H200", "gpu_cores": None, "gpu_name": "NVIDIA H200"}


def one_size(batch_size: int, ratio: float = 1.1) -> dict[str, dict[int, list[float]]]:
    return {"upstream": {batch_size: [100.0, 100.0]}, "01": {batch_size: [100.0 * ratio] * 2}}


def submitted(api: Api, signer: envelope.Signer, payload: dict[str, Any]) -> Submission:
    response = api.submit(payload, signer)
    assert response.status_code == 201, response.json()
    refresh_submission_cells(response.json()["id"])
    return Submission.objects.get(pk=response.json()["id"])


@dataclass(frozen=True)
class Site:
    ada: Submission  # Apple M5 Pro, BS2
    bob: Submission  # Apple M5 Pro, BS4: the same model file, another key
    twin: Submission  # Apple M5 Pro, another file with the same display name
    control: Submission  # NVIDIA H200 on CUDA


def build(api: Api, signers: dict[str, envelope.Signer]) -> Site:
    for name in ("bob", "cole", "dina"):
        assert api.register(signers[name], name).status_code == 201
    return Site(
        ada=submitted(api, signers["ada"], build_payload(tg=one_size(2))),
        bob=submitted(api, signers["bob"], build_payload(tg=one_size(4))),
        twin=submitted(api, signers["dina"], build_payload(tg=one_size(4, 1.2), model={"sha256": TWIN_SHA})),
        control=submitted(api, signers["cole"], build_payload(tg=one_size(4, 1.0), machine=H200)),
    )


def judge(where: dict[str, Any], **facts: Any) -> int:
    """Write v3 facts onto the cells `where` selects."""
    return LeaderboardCell.objects.filter(**where).update(updated_at=timezone.now(), **facts)
