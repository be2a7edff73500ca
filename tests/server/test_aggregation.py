"""docs/protocol.md, cells: round-paired ratios inside a submission, the machine (a key) as the unit
across submissions, the exclusion rules, the server's own flags, and the cells the Celery task, the
sweeper, rebuild_cells and rederive_measurements produce. The statistics themselves are tested in tests/protocol/."""

from __future__ import annotations

import io
import uuid
from datetime import timedelta
from typing import Any

import pytest
from benchhub_protocol import envelope
from django.contrib.auth.models import AnonymousUser
from django.core.management import call_command
from django.utils import timezone

from benchhub.results import board, cells, moderation, tasks
from benchhub.results.models import Headline, LeaderboardCell, Measurement, Submission
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


def machine(n: int) -> dict[str, Any]:
    """Another memory size claimed by the same key: still the same machine."""
    return {"memory_bytes": (16 + n) * 2**30}


def ratio_run(baseline: float, ratio: float) -> dict[str, dict[int, list[float]]]:
    return {"upstream": {4: [baseline, baseline]}, "01": {4: [baseline * ratio, baseline * ratio]}}


def test_it_takes_the_median_over_whole_cycles_of_the_cycles_ratios(api: Api, ada: envelope.Signer) -> None:
    # Two variants: a cycle is two rounds. Cycles of ratios (1.5, 1.0), (2.0, 2.0), (1.1, 1.1) and a
    # fifth round that starts a cycle it never finished: the cycles' geometric means are 1.2247, 2.0 and
    # 1.1, their median 1.2247; the rounds' median would be 1.5.
    tg = {"upstream": {4: [100, 200, 50, 50, 100, 100, 100]}, "01": {4: [150, 200, 100, 100, 110, 110, 900]}}
    submission = submit_and_refresh(api, ada, tg=tg)
    measurement = Measurement.objects.get(submission=submission, variant_name="01", batch_size=4)
    assert (measurement.n_rounds, measurement.n_cycles, measurement.se_df) == (7, 3, 2)
    assert measurement.speedup == pytest.approx(1.5**0.5)
    result = cell("01", 4)
    assert result.speedup == pytest.approx(1.5**0.5) and result.baseline_tg_tps == pytest.approx(100)


def test_a_submission_without_a_whole_cycle_counts_nowhere(api: Api, ada: envelope.Signer) -> None:
    tg = {name: {4: [100.0, 100.0]} for name in ("upstream", "01", "01+02")}  # A B C, C B A: B never moved
    submission = submit_and_refresh(api, ada, tg=tg)
    measurement = Measurement.objects.get(submission=submission, variant_name="01", batch_size=4)
    assert (measurement.speedup, measurement.excluded_reason) == (None, Measurement.Excluded.NONSTANDARD)


def test_it_counts_machines_not_submissions(api: Api, ada: envelope.Signer, bob: envelope.Signer) -> None:
    for index in range(5):  # one key sends five results, each claiming another memory size: one machine
        submit_and_refresh(api, ada, tg=ratio_run(100 + index, 2.0), machine=machine(index))
    submit_and_refresh(api, bob, tg=ratio_run(100, 1.1))
    submit_and_refresh(api, api.another_machine(bob, "bob", 1), tg=ratio_run(100, 1.2))
    result = cell("01", 4)
    assert (result.n_machines, result.n_submissions, result.n_contributors) == (3, 7, 2)
    assert result.speedup == pytest.approx((2.0 * 1.1 * 1.2) ** (1 / 3)), "equal machines weigh alike"
    assert result.tg_tps == pytest.approx(result.baseline_tg_tps * result.speedup)


def test_it_makes_one_machine_of_one_key_whatever_hardware_it_claims(api: Api, ada: envelope.Signer) -> None:
    for index in range(6):
        submit_and_refresh(api, ada, tg=ratio_run(100 + index, 1.5), machine=machine(index))
    result = cell("01", 4)
    assert (result.n_machines, result.n_submissions) == (1, 6)
    assert result.verdict == "too few machines"


def test_it_gives_one_machine_no_interval(api: Api, ada: envelope.Signer) -> None:
    submit_and_refresh(api, ada, tg=ratio_run(100, 1.5))
    result = cell("01", 4)
    assert (result.n_machines, result.interval, result.ci_low, result.ci_high) == (1, None, None, None)


def test_it_keeps_chips_core_counts_and_model_files_in_separate_cells(api: Api, ada: envelope.Signer) -> None:
    submit_and_refresh(api, ada)
    submit_and_refresh(api, ada, tg=ratio_run(90, 1.1), machine={"chip": "Apple M1"})
    submit_and_refresh(api, ada, tg=ratio_run(91, 1.1), machine={"gpu_cores": 16})
    submit_and_refresh(api, ada, tg=ratio_run(92, 1.1), model={"sha256": "e" * 64})
    keys = set(
        LeaderboardCell.objects.filter(variant="01", batch_size=4).values_list("chip", "gpu_cores", "model_sha256")
    )
    assert len(keys) == 4


def test_it_leaves_out_and_counts_each_exclusion_by_its_reason(
    api: Api, ada: envelope.Signer, bob: envelope.Signer
) -> None:
    keys = [ada, *(api.another_machine(ada, "ada", n) for n in range(1, 4))]
    submit_and_refresh(api, keys[0], tg=ratio_run(100, 1.5))
    submit_and_refresh(api, keys[1], tg=ratio_run(101, 1.5), correctness={"01": "fail"})
    submit_and_refresh(api, keys[2], tg=ratio_run(102, 1.5), correctness={"01": "not_run"})
    submit_and_refresh(api, keys[3], tg=ratio_run(103, 1.5), degenerate={"01": True})
    submit_and_refresh(api, bob, tg=ratio_run(104, 1.5), machine={"power_source": "battery"})
    submit_and_refresh(api, bob, tg=ratio_run(105, 1.5), machine={"thermal": "pressure", "memory_bytes": 2**35})
    hidden = submit_and_refresh(api, bob, tg=ratio_run(106, 1.9))
    moderation.set_hidden([hidden], True, AnonymousUser(), "spam")
    submit_and_refresh(api, bob, tg=ratio_run(107, 9.0))  # beyond the campaign's plausible range: held
    withdrawn = submit_and_refresh(api, bob, tg=ratio_run(108, 1.4))
    moderation.withdraw(withdrawn, b"{}")
    cells.refresh_submission_cells(str(hidden.pk))
    result = cell("01", 4)
    assert (result.n_machines, result.n_submissions, result.speedup) == (1, 1, 1.5)
    assert result.excluded == {
        "hidden": 1,
        "withdrawn": 1,
        "held": 1,
        "correctness_failed": 1,
        "correctness_not_run": 1,
        "degenerate_output": 1,
        "run_state": 2,
    }


def test_it_does_not_count_a_sweep_of_fewer_than_two_rounds(api: Api, ada: envelope.Signer) -> None:
    submission = submit_and_refresh(api, ada, tg={"upstream": {4: [100]}, "01": {4: [150]}})
    assert "nonstandard_sweep" in submission.flags
    result = cell("01", 4) if LeaderboardCell.objects.exists() else None
    assert result is None, "a nonstandard submission makes no cell, not even an excluded row"


def test_it_does_not_count_a_variant_run_without_its_campaigns_environment(api: Api, ada: envelope.Signer) -> None:
    payload = build_payload(tg={"upstream": {4: [100, 100]}, "01+02": {4: [150, 150]}})
    payload["variants"][1]["env"] = {}  # without the campaign's four GGML_METAL_MV_*_VEC switches
    response = api.submit(payload, ada)
    assert response.status_code == 201, response.json()
    assert "nonstandard_sweep" in Submission.objects.get(pk=response.json()["id"]).flags


@pytest.mark.parametrize(("source", "flagged"), [("local", True), ("pinned", False), (None, False)])
def test_it_flags_a_result_built_from_a_local_source_tree(
    source: str | None, flagged: bool, api: Api, ada: envelope.Signer
) -> None:
    payload = build_payload()
    if source:
        payload["llama_cpp"]["source"] = source  # what `--llama-src` and `--variant` runs say (issue 31)
    response = api.submit(payload, ada)
    assert response.status_code == 201, response.json()
    assert ("local_source" in Submission.objects.get(pk=response.json()["id"]).flags) is flagged


def test_it_refuses_a_source_that_is_neither_pinned_nor_local(api: Api, ada: envelope.Signer) -> None:
    payload = build_payload()
    payload["llama_cpp"]["source"] = "upstream"
    response = api.submit(payload, ada)
    assert response.status_code == 400 and response.json()["field"] == "llama_cpp.source", response.json()


def test_it_refuses_the_same_sweep_rows_sent_again_under_a_fresh_nonce(api: Api, ada: envelope.Signer) -> None:
    payload = build_payload()
    first = api.submit(payload, ada).json()["id"]
    again = api.submit({**payload, "nonce": "f" * 32}, ada)
    assert again.status_code == 409
    assert again.json()["error"] == "duplicate_measurement"
    assert first in again.json()["detail"] and again.json()["submission"] == first


def test_it_counts_one_measurement_once_whoever_signs_it_again(
    api: Api, ada: envelope.Signer, bob: envelope.Signer
) -> None:
    payload = build_payload()
    first = api.submit(payload, ada).json()["id"]
    resigned = {**payload, "nonce": "e" * 32, "created_at": "2026-11-30T08:00:00Z"}
    # Another order of runs, renumbered, other timings: the same measured rows all the same.
    runs = [
        {**run, "seq": seq, "rows": [{**row, "t_pp_s": row["t_pp_s"] + 0.01} for row in run["rows"]]}
        for seq, run in enumerate(reversed(payload["sweep"]["runs"]), start=1)
    ]
    resigned["sweep"] = {**payload["sweep"], "runs": runs}
    again = api.submit(resigned, bob)
    assert again.status_code == 409, again.json()
    assert (again.json()["error"], again.json()["submission"]) == ("duplicate_measurement", first)


def test_it_quarantines_numbers_no_honest_run_gives_until_a_moderator_releases_them(
    api: Api, ada: envelope.Signer, client: Any
) -> None:
    submission = submit_and_refresh(api, ada, tg=ratio_run(100, 9.9))
    assert "quarantined" in submission.flags and submission.state == "hidden"
    assert cell("01", 4).excluded["held"] == 1 and cell("01", 4).n_machines == 0
    page = client.get(f"/submissions/{submission.pk}/").content.decode()
    assert "quarantined" in page and "9.9x its baseline" in page
    moderation.set_released([submission], True, AnonymousUser(), "checked with the contributor")
    cells.refresh_submission_cells(str(submission.pk))
    assert cell("01", 4).n_machines == 1


def test_it_refreshes_idempotently(api: Api, ada: envelope.Signer) -> None:
    submission = submit_and_refresh(api, ada)
    before = sorted(LeaderboardCell.objects.values_list("variant", "batch_size", "speedup", "n_submissions"))
    assert tasks.refresh_cells_for_submission(str(submission.pk)) == 4
    after = sorted(LeaderboardCell.objects.values_list("variant", "batch_size", "speedup", "n_submissions"))
    assert before == after


def test_it_requeues_the_groups_of_submissions_whose_cells_were_never_refreshed(
    api: Api, ada: envelope.Signer, settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings.BENCHHUB_SWEEPER_GRACE_SECONDS = 30
    queued: list[tuple[object, ...]] = []
    monkeypatch.setattr(tasks.refresh_group_cells, "delay", lambda *args: queued.append(args))
    fresh = api.submit(build_payload(), ada).json()["id"]
    stale = api.submit(build_payload(tg=ratio_run(90, 1.2), machine={"chip": "Apple M4 Max"}), ada).json()["id"]
    Submission.objects.filter(pk=stale).update(received_at=timezone.now() - timedelta(minutes=5))
    assert tasks.requeue_stale_submissions() == 1
    assert queued == [board.Group.of(Submission.objects.get(pk=stale)).task_args()]
    assert tasks.requeue_stale_submissions() == 0, "not queued again while that refresh waits"
    tasks.refresh_group_cells(*queued[0])
    assert Submission.objects.get(pk=stale).cells_refreshed_at is not None
    assert Submission.objects.get(pk=fresh).cells_refreshed_at is None, "another group"
    Submission.objects.filter(pk=fresh).update(received_at=timezone.now() - timedelta(minutes=5))
    assert tasks.requeue_stale_submissions() == 1
    assert queued[1] == board.Group.of(Submission.objects.get(pk=fresh)).task_args()


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
        ids = [
            api.submit(build_payload(tg=ratio_run(100 + index, 1.5)), signer).json()["id"]
            for index, signer in enumerate((ada, bob, ada))
        ]
    assert len(queued) == 1, "the second and third found the group's refresh already queued"
    assert tasks.refresh_group_cells(*queued[0]) == 2  # BS4 of upstream and 01
    assert not Submission.objects.filter(pk__in=ids, cells_refreshed_at__isnull=True).exists()
    assert cell("01", 4).n_submissions == 3
    assert tasks.refresh_group_cells(*queued[0]) == 0, "a duplicate message finds nobody waiting"
    with django_capture_on_commit_callbacks(execute=True):
        api.submit(build_payload(tg=ratio_run(110, 1.5)), bob)
    assert len(queued) == 2, "the refresh released the group once it held the lock: the next submission queues again"


def test_it_marks_refreshed_only_the_submissions_it_read(api: Api, ada: envelope.Signer, bob: envelope.Signer) -> None:
    first = submit_and_refresh(api, ada)
    group = board.Group.of(first)
    late = api.submit(build_payload(), bob).json()["id"]
    Submission.objects.filter(pk=late).update(cells_refreshed_at=None)
    assert list(group.waiting_submissions().values_list("pk", flat=True)) == [uuid.UUID(late)]
    assert cells.refresh_group(group) == 4
    assert not group.waiting_submissions().exists()
    assert cell("01", 4).n_submissions == 2


def test_it_rederives_every_measurement_and_cell_from_the_raw_envelopes(
    api: Api, ada: envelope.Signer, bob: envelope.Signer, campaign: Any
) -> None:
    submit_and_refresh(api, ada, tg={"upstream": {1: [50, 50], 4: [100, 100]}, "01": {1: [50, 50], 4: [150, 150]}})
    submit_and_refresh(api, bob, tg={"upstream": {4: [100, 100]}, "01": {4: [170, 170]}})
    expected = sorted(LeaderboardCell.objects.values_list("variant", "batch_size", "speedup", "n_submissions"))
    Measurement.objects.all().delete()
    LeaderboardCell.objects.all().delete()
    LeaderboardCell.objects.create(
        campaign_id=campaign.pk, chip="ghost", model_sha256="0" * 64, quant="Q", variant="x", batch_size=1, verdict="-"
    )
    output = io.StringIO()
    call_command("rederive_measurements", stdout=output)
    assert "2 submission(s) re-derived" in output.getvalue()
    assert sorted(LeaderboardCell.objects.values_list("variant", "batch_size", "speedup", "n_submissions")) == expected
    assert not Submission.objects.filter(cells_refreshed_at__isnull=True).exists()


def test_rebuild_cells_recomputes_every_groups_cells_and_drops_cells_of_no_group(
    api: Api, ada: envelope.Signer, bob: envelope.Signer, campaign: Any
) -> None:
    submit_and_refresh(api, ada, tg={"upstream": {1: [50, 50], 4: [100, 100]}, "01": {1: [50, 50], 4: [150, 150]}})
    submit_and_refresh(api, bob, tg={"upstream": {4: [100, 100]}, "01": {4: [170, 170]}}, machine={"chip": "Apple M4"})
    expected = sorted(LeaderboardCell.objects.values_list("chip", "variant", "batch_size", "speedup", "n_submissions"))
    headlines = sorted(Headline.objects.values_list("chip", "variant", "speedup", "n_machines"))
    LeaderboardCell.objects.filter(chip="Apple M4").delete()
    LeaderboardCell.objects.update(speedup=9.0)
    Headline.objects.all().delete()
    LeaderboardCell.objects.create(
        campaign_id=campaign.pk, chip="ghost", model_sha256="0" * 64, quant="Q", variant="x", batch_size=1, verdict="-"
    )
    output = io.StringIO()
    call_command("rebuild_cells", stdout=output)
    assert "cell(s) of 2 group(s) recomputed" in output.getvalue()
    assert sorted(LeaderboardCell.objects.values_list("chip", "variant", "batch_size", "speedup", "n_submissions")) == (
        expected
    )
    assert sorted(Headline.objects.values_list("chip", "variant", "speedup", "n_machines")) == headlines


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
    assert queued == [board.Group.of(Submission.objects.get(pk=submission_id)).task_args()]


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


def test_a_poisoned_row_never_stops_its_groups_refresh(api: Api, ada: envelope.Signer, bob: envelope.Signer) -> None:
    """Ingest's bounds keep such numbers out; a row stored before a bound existed must still not
    freeze the group for everyone else."""
    first = submit_and_refresh(api, ada, tg=ratio_run(100, 1.5))
    Measurement.objects.filter(submission=first, variant_name="01").update(speedup=float("inf"))
    honest = submit_and_refresh(api, bob, tg=ratio_run(100, 1.2))
    assert honest.cells_refreshed_at is not None
    result = cell("01", 4)
    assert (result.n_machines, result.speedup) == (1, 1.2)
    assert api.client.get("/api/v1/leaderboard/", {"campaign": "mv-ext-iquants"}).status_code == 200


def test_it_stores_each_variants_headline_over_the_campaigns_batch_sizes_2_to_8(api: Api, ada: envelope.Signer) -> None:
    sizes = (2, 3, 4, 5, 8)
    for index, (signer, ratio) in enumerate(((ada, 1.2), (api.another_machine(ada, "ada", 1), 1.5))):
        tg = {
            "upstream": {bs: [100.0 + index] * 2 for bs in sizes},
            "01": {bs: [(100.0 + index) * ratio] * 2 for bs in sizes},
        }
        submit_and_refresh(api, signer, tg=tg)
    found = Headline.objects.get(variant="01")
    assert found.batch_sizes == [2, 3, 4, 5, 8]
    assert found.n_machines == 2
    assert found.speedup == pytest.approx(1.35, rel=0.02)
