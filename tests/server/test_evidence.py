"""Evidence integrity at ingest and in the cells (docs/protocol.md, cells): a signature proves who
sent a result, not that it is true or new. Each test is an attack a valid key can make."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from benchhub_protocol import envelope, rounds
from django.utils import timezone

from benchhub.accounts.models import PublicKey
from benchhub.results import board, cells, tasks
from benchhub.results.models import LeaderboardCell, Submission
from tests.conftest import Api, build_payload

pytestmark = pytest.mark.django_db


def ratio_run(baseline: float, ratio: float, rounds: int = 2) -> dict[str, dict[int, list[float]]]:
    return {"upstream": {4: [baseline] * rounds}, "01": {4: [baseline * ratio] * rounds}}


def submitted(api: Api, signer: envelope.Signer, **options: Any) -> Submission:
    response = api.submit(build_payload(**options), signer)
    assert response.status_code == 201, response.json()
    cells.refresh_submission_cells(response.json()["id"])
    return Submission.objects.get(pk=response.json()["id"])


def cell(**key: Any) -> LeaderboardCell:
    return LeaderboardCell.objects.get(variant="01", batch_size=4, **key)


def test_it_refuses_more_rounds_than_the_protocol_allows(api: Api, ada: envelope.Signer) -> None:
    response = api.submit(build_payload(tg=ratio_run(100, 1.1, rounds=rounds.MAX_ROUNDS + 1)), ada)
    assert response.status_code == 400
    assert (response.json()["error"], response.json()["field"]) == ("too_many_rounds", "sweep.runs")
    assert api.submit(build_payload(tg=ratio_run(100, 1.1, rounds=rounds.MAX_ROUNDS)), ada).status_code == 201


@pytest.mark.parametrize(
    ("created_at", "error"),
    [
        ((timezone.now() + timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%SZ"), "created_in_future"),
        ("2025-01-01T00:00:00Z", "created_before_campaign"),
    ],
)
def test_it_refuses_a_created_at_outside_the_campaigns_time(
    api: Api, ada: envelope.Signer, created_at: str, error: str
) -> None:
    response = api.submit({**build_payload(), "created_at": created_at}, ada)
    assert response.status_code == 400
    assert (response.json()["error"], response.json()["field"]) == (error, "created_at")
    assert not Submission.objects.exists()


def test_it_accepts_a_clock_a_little_ahead(api: Api, ada: envelope.Signer) -> None:
    ahead = (timezone.now() + timedelta(minutes=2)).strftime("%Y-%m-%dT%H:%M:%SZ")
    assert api.submit({**build_payload(), "created_at": ahead}, ada).status_code == 201


def test_it_holds_a_rate_beyond_the_chips_memory_bandwidth(api: Api, ada: envelope.Signer, client: Any) -> None:
    # An M1 reads at most 68.25 GB/s: 651 MB of weights decode at most ~131 t/s a stream (x1.25 margin).
    honest = submitted(api, ada, machine={"chip": "Apple M1"}, tg=ratio_run(100, 1.2))
    assert "quarantined" not in honest.flags
    forged = submitted(api, ada, machine={"chip": "Apple M1"}, tg=ratio_run(5_000_000, 1.2))
    assert "quarantined" in forged.flags
    assert cell(chip="Apple M1").excluded["held"] == 1 and cell(chip="Apple M1").n_submissions == 1
    page = client.get(f"/submissions/{forged.pk}/").content.decode()
    assert "beyond" in page and "68.25 GB/s" in page


@pytest.mark.parametrize(
    "model",
    [
        {"size_bytes": 0},
        {"n_params": 0},
        {"tensor_bytes_by_type": {"IQ2_XXS": 0}},
        {"size_bytes": 5_000_000_000},  # far more than its tensors
        {"n_params": 100_000_000_000},  # more parameters than its bytes can hold
    ],
)
def test_it_refuses_a_model_whose_sizes_are_zero_or_disagree(
    api: Api, ada: envelope.Signer, model: dict[str, Any]
) -> None:
    response = api.submit(build_payload(model=model), ada)
    assert response.status_code == 400 and response.json()["field"].startswith("model."), response.json()
    assert not Submission.objects.exists()


def test_a_new_keys_results_show_at_once_and_count_after_probation(
    api: Api, ada: envelope.Signer, settings: Any, client: Any
) -> None:
    settings.BENCHHUB_KEY_PROBATION_S = 86400
    submission = submitted(api, ada, tg=ratio_run(100, 1.3))
    assert client.get(f"/submissions/{submission.pk}/").status_code == 200
    assert (cell().n_machines, cell().n_pending) == (0, 1)
    # Two days later: the key was registered, and the cells refreshed, two days ago.
    registered = timezone.now() - timedelta(days=2)
    PublicKey.objects.update(created_at=registered)
    Submission.objects.update(cells_refreshed_at=registered + timedelta(minutes=1))
    assert tasks.end_probation() == 1
    group = board.Group.of(submission)
    assert group.waiting_submissions().exists()
    cells.refresh_group(group)
    assert (cell().n_machines, cell().n_pending) == (1, 0)
    assert tasks.end_probation() == 0, "done once"


def test_it_says_when_a_result_on_probation_will_count(api: Api, ada: envelope.Signer, settings: Any) -> None:
    settings.BENCHHUB_KEY_PROBATION_S = 3600
    body = api.submit(build_payload(), ada).json()
    key = PublicKey.objects.get()
    assert body["counts_from"] == (key.created_at + timedelta(seconds=3600)).isoformat().replace("+00:00", "Z")
    settings.BENCHHUB_KEY_PROBATION_S = 0
    assert api.submit(build_payload(), ada).json()["counts_from"] is None


def test_a_row_on_a_backend_the_patches_do_not_touch_is_a_control(api: Api, ada: envelope.Signer) -> None:
    submitted(api, ada, machine={"backend": "cuda", "chip": "NVIDIA H200"}, tg=ratio_run(100, 1.0))
    assert cell(chip="NVIDIA H200").control is True
    submitted(api, ada, tg=ratio_run(100, 1.3))
    assert cell(chip="Apple M5 Pro").control is False
