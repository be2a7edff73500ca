"""PROTOCOL.md section 5: paired ratios inside a submission, medians across submissions, the
exclusion rules, and the cells the Celery task, the sweeper and rebuild_cells produce."""

from __future__ import annotations

import io
import uuid
from datetime import timedelta
from typing import Any

import pytest
from benchhub_agent import envelope
from django.core.management import call_command
from django.utils import timezone

from benchhub.accounts.models import ModerationEvent
from benchhub.results import cells, moderation, tasks
from benchhub.results.models import LeaderboardCell, Measurement, Submission
from tests.conftest import Api, build_payload, persona

pytestmark = pytest.mark.django_db


def submit_and_refresh(api: Api, signer: envelope.Signer, **payload_options: Any) -> Submission:
    response = api.submit(build_payload(**payload_options), signer)
    assert response.status_code == 201, response.json()
    cells.refresh_submission_cells(response.json()["id"])
    return Submission.objects.get(pk=response.json()["id"])


def cell(variant: str, batch_size: int, **key: Any) -> LeaderboardCell:
    return LeaderboardCell.objects.get(variant=variant, batch_size=batch_size, chip=key.get("chip", "Apple M5 Pro"))


@pytest.fixture
def bob(api: Api, campaign: Any) -> envelope.Signer:
    assert api.register(persona("bob"), "bob").status_code == 201
    return persona("bob")


def test_it_pairs_the_median_over_reps_with_the_baselines_median(api: Api, ada: envelope.Signer) -> None:
    submission = submit_and_refresh(api, ada, tg={"upstream": {4: [140, 150, 148]}, "01": {4: [200, 212, 210]}})
    measurement = Measurement.objects.get(submission=submission, variant_name="01", batch_size=4)
    assert (measurement.tg_tps, measurement.baseline_tg_tps, measurement.n_reps) == (210, 148, 3)
    assert measurement.speedup == pytest.approx(210 / 148)
    assert measurement.spread == pytest.approx(12 / 210)
    baseline = Measurement.objects.get(submission=submission, variant_name="upstream", batch_size=4)
    assert baseline.speedup == 1.0


def test_it_takes_medians_across_submissions_and_counts_contributors(
    api: Api, ada: envelope.Signer, bob: envelope.Signer
) -> None:
    submit_and_refresh(api, ada, tg={"upstream": {8: [100, 100]}, "01": {8: [150, 150]}})
    submit_and_refresh(api, ada, tg={"upstream": {8: [120, 120]}, "01": {8: [156, 156]}})
    submit_and_refresh(api, bob, tg={"upstream": {8: [90, 90]}, "01": {8: [162, 162]}})
    result = cell("01", 8)
    assert result.speedup == pytest.approx(1.5), "median of 1.5, 1.3 and 1.8"
    assert (result.tg_tps, result.baseline_tg_tps) == (156, 100)
    assert (result.ci_low, result.ci_high) == (pytest.approx(1.3), pytest.approx(1.8))
    assert (result.n_submissions, result.n_contributors) == (3, 2)


def test_it_keeps_chips_core_counts_and_quants_in_separate_cells(api: Api, ada: envelope.Signer) -> None:
    submit_and_refresh(api, ada)
    submit_and_refresh(api, ada, machine={"gpu_cores": 16})
    submit_and_refresh(api, ada, model={"file_type": "IQ3_XXS", "sha256": "e" * 64})
    submit_and_refresh(api, ada, machine={"chip": "Intel Xeon", "gpu_cores": None, "backend": "cpu"})
    keys = set(LeaderboardCell.objects.filter(variant="01", batch_size=4).values_list("chip", "gpu_cores", "quant"))
    assert keys == {
        ("Apple M5 Pro", 20, "IQ2_XXS"),
        ("Apple M5 Pro", 16, "IQ2_XXS"),
        ("Apple M5 Pro", 20, "IQ3_XXS"),
        ("Intel Xeon", None, "IQ2_XXS"),
    }


def test_it_excludes_a_variant_whose_correctness_failed(api: Api, ada: envelope.Signer) -> None:
    submit_and_refresh(api, ada)
    submit_and_refresh(api, ada, correctness={"01": "fail"}, tg={"upstream": {4: [100, 100]}, "01": {4: [300, 300]}})
    result = cell("01", 4)
    assert (result.n_submissions, result.n_excluded_correctness) == (1, 1)
    assert result.speedup == pytest.approx(210 / 148)


def test_it_does_not_exclude_a_correctness_check_that_did_not_run(api: Api, ada: envelope.Signer) -> None:
    submission = submit_and_refresh(api, ada, correctness={"01": "not_run"})
    measurement = Measurement.objects.get(submission=submission, variant_name="01", batch_size=4)
    assert (measurement.correctness_status, measurement.excluded_reason) == ("not_run", "")


def test_it_excludes_degenerate_output_only_where_the_baseline_was_not_degenerate(
    api: Api, ada: envelope.Signer
) -> None:
    submit_and_refresh(api, ada, degenerate={"01": True})
    assert cell("01", 4).n_excluded_degenerate == 1
    assert cell("01", 4).n_submissions == 0
    submit_and_refresh(api, ada, degenerate={"01": True, "upstream": True})
    assert (cell("01", 4).n_submissions, cell("01", 4).n_excluded_degenerate) == (1, 1)


def test_it_takes_a_hidden_submission_out_of_the_cells_and_audits_it(
    api: Api, ada: envelope.Signer, bob: envelope.Signer, admin_user: Any
) -> None:
    submit_and_refresh(api, ada, tg={"upstream": {4: [100, 100]}, "01": {4: [150, 150]}})
    outlier = submit_and_refresh(api, bob, tg={"upstream": {4: [100, 100]}, "01": {4: [900, 900]}})
    assert cell("01", 4).n_submissions == 2
    assert moderation.set_hidden(Submission.objects.filter(pk=outlier.pk), True, admin_user, "implausible") == 1
    cells.refresh_submission_cells(str(outlier.pk))
    result = cell("01", 4)
    assert (result.n_submissions, result.speedup) == (1, 1.5)
    event = ModerationEvent.objects.get()
    assert (event.actor_name, event.action, event.target, event.reason) == (
        "admin",
        "hide_submission",
        str(outlier.pk),
        "implausible",
    )


def test_it_refreshes_idempotently(api: Api, ada: envelope.Signer) -> None:
    submission = submit_and_refresh(api, ada)
    before = list(LeaderboardCell.objects.values_list("variant", "batch_size", "speedup", "n_submissions"))
    assert tasks.refresh_cells_for_submission(str(submission.pk)) == 4
    after = list(LeaderboardCell.objects.values_list("variant", "batch_size", "speedup", "n_submissions"))
    assert before == after


def test_it_requeues_the_groups_of_submissions_whose_cells_were_never_refreshed(
    api: Api, ada: envelope.Signer, settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings.BENCHHUB_SWEEPER_GRACE_SECONDS = 30
    queued: list[tuple[object, ...]] = []
    monkeypatch.setattr(tasks.refresh_group_cells, "delay", lambda *args: queued.append(args))
    fresh = api.submit(build_payload(), ada).json()["id"]
    stale = api.submit(build_payload(machine={"chip": "Apple M4 Max"}), ada).json()["id"]
    Submission.objects.filter(pk=stale).update(received_at=timezone.now() - timedelta(minutes=5))
    assert tasks.requeue_stale_submissions() == 1
    assert queued == [cells.Group.of(Submission.objects.get(pk=stale)).task_args()]
    assert tasks.requeue_stale_submissions() == 0, "not queued again while that refresh waits"
    tasks.refresh_group_cells(*queued[0])
    assert Submission.objects.get(pk=stale).cells_refreshed_at is not None
    assert Submission.objects.get(pk=fresh).cells_refreshed_at is None, "another group"
    Submission.objects.filter(pk=fresh).update(received_at=timezone.now() - timedelta(minutes=5))
    assert tasks.requeue_stale_submissions() == 1
    assert queued[1] == cells.Group.of(Submission.objects.get(pk=fresh)).task_args()


def test_it_queues_one_refresh_for_a_burst_into_one_group_and_it_takes_them_all(
    api: Api,
    ada: envelope.Signer,
    bob: envelope.Signer,
    monkeypatch: pytest.MonkeyPatch,
    django_capture_on_commit_callbacks: Any,
) -> None:
    queued: list[tuple[object, ...]] = []
    monkeypatch.setattr(tasks.refresh_group_cells, "delay", lambda *args: queued.append(args))
    with django_capture_on_commit_callbacks(execute=True):
        ids = [api.submit(build_payload(), signer).json()["id"] for signer in (ada, bob, ada)]
    assert len(queued) == 1, "the second and third found the group's refresh already queued"
    assert tasks.refresh_group_cells(*queued[0]) == 4
    assert not Submission.objects.filter(pk__in=ids, cells_refreshed_at__isnull=True).exists()
    assert cell("01", 4).n_submissions == 3
    assert tasks.refresh_group_cells(*queued[0]) == 0, "a duplicate message finds nobody waiting"
    with django_capture_on_commit_callbacks(execute=True):
        api.submit(build_payload(), bob)
    assert len(queued) == 2, "the refresh that started released the group: the next submission queues again"


def test_it_marks_refreshed_only_the_submissions_it_read(api: Api, ada: envelope.Signer, bob: envelope.Signer) -> None:
    first = submit_and_refresh(api, ada)
    group = cells.Group.of(first)
    late = api.submit(build_payload(), bob).json()["id"]
    Submission.objects.filter(pk=late).update(cells_refreshed_at=None)
    assert list(group.waiting_submissions().values_list("pk", flat=True)) == [uuid.UUID(late)]
    assert cells.refresh_group(group) == 4
    assert not group.waiting_submissions().exists()
    assert cell("01", 4).n_submissions == 2


def test_it_rebuilds_every_cell_from_the_raw_envelopes(
    api: Api, ada: envelope.Signer, bob: envelope.Signer, campaign: Any
) -> None:
    submit_and_refresh(api, ada, tg={"upstream": {1: [50, 50], 4: [100, 100]}, "01": {1: [50, 50], 4: [150, 150]}})
    submit_and_refresh(api, bob, tg={"upstream": {4: [100, 100]}, "01": {4: [170, 170]}})
    expected = sorted(LeaderboardCell.objects.values_list("variant", "batch_size", "speedup", "n_submissions"))
    Measurement.objects.all().delete()
    LeaderboardCell.objects.all().delete()
    LeaderboardCell.objects.create(
        campaign_id=Submission.objects.first().campaign_id, chip="ghost", quant="Q", variant="x", batch_size=1
    )  # type: ignore[union-attr]
    output = io.StringIO()
    call_command("rebuild_cells", stdout=output)
    assert "Rebuilt 2 submission(s)" in output.getvalue()
    assert sorted(LeaderboardCell.objects.values_list("variant", "batch_size", "speedup", "n_submissions")) == expected
    assert not Submission.objects.filter(cells_refreshed_at__isnull=True).exists()


def test_it_queues_the_cell_refresh_once_the_submission_has_committed(
    api: Api, ada: envelope.Signer, django_capture_on_commit_callbacks: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    queued: list[tuple[object, ...]] = []
    monkeypatch.setattr(tasks.refresh_group_cells, "delay", lambda *args: queued.append(args))
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        submission_id = api.submit(build_payload(), ada).json()["id"]
    assert queued == [], "nothing is queued before the commit"
    for callback in callbacks:
        callback()
    assert queued == [cells.Group.of(Submission.objects.get(pk=submission_id)).task_args()]


def test_it_accepts_a_submission_while_the_broker_is_down_and_leaves_it_to_the_sweeper(
    api: Api, ada: envelope.Signer, django_capture_on_commit_callbacks: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broker_down(*args: object) -> None:
        raise ConnectionError("redis is down")

    monkeypatch.setattr(tasks.refresh_group_cells, "delay", broker_down)
    with django_capture_on_commit_callbacks(execute=True):
        response = api.submit(build_payload(), ada)
    assert response.status_code == 201
    assert Submission.objects.get().cells_refreshed_at is None
