"""seed_demo: the quick start's data, signed and ingested for real, marked demo, safe to rerun."""

from io import StringIO

import pytest
from benchhub_agent import __version__
from django.core.management import call_command
from django.core.management.base import CommandError

from benchhub.accounts.models import Contributor
from benchhub.results.models import Campaign, LeaderboardCell, RawEnvelope, Submission
from benchhub.results.published import ReferenceRow
from benchhub.web import demo

pytestmark = pytest.mark.django_db


def test_it_seeds_published_rows_and_demo_submissions_through_the_ingest_once(live_campaign: Campaign) -> None:
    out = StringIO()
    call_command("seed_demo", stdout=out)
    runs = len(demo.demo_runs())
    assert f"demo submissions: {runs} created, 0 already present" in out.getvalue()
    assert ReferenceRow.objects.count() == 19
    assert Submission.objects.count() == RawEnvelope.objects.count() == runs
    assert not Submission.objects.filter(is_demo=False).exists()
    # The agent this site serves (/agent/), not a version that does not exist.
    assert set(Submission.objects.values_list("agent_version", flat=True)) == {__version__}
    assert set(Contributor.objects.values_list("handle", flat=True)) == set(demo.HANDLES)
    assert not Contributor.objects.filter(is_demo=False).exists()
    chips = set(LeaderboardCell.objects.filter(n_machines__gt=0).values_list("chip", flat=True))
    assert chips == {chip.chip for chip in demo.CHIPS}
    assert LeaderboardCell.objects.filter(excluded__correctness_failed__gt=0, chip="Apple M2").exists()
    assert LeaderboardCell.objects.filter(excluded__degenerate_output__gt=0, chip="Apple M3 Pro").exists()
    flagged = Submission.objects.filter(status=Submission.Status.FLAGGED).count()
    assert flagged == 2  # exactly the two runs built to go wrong

    again = StringIO()
    call_command("seed_demo", stdout=again)
    assert f"demo submissions: 0 created, {runs} already present" in again.getvalue()
    assert Submission.objects.count() == runs


def test_it_never_marks_a_real_contributor_who_took_a_demo_handle(live_campaign: Campaign) -> None:
    from benchhub_protocol import envelope

    from benchhub.results.ingest import register

    stranger = envelope.Signer.from_seed(b"\x07" * 32)
    payload = {
        "schema_version": 1,
        "handle": demo.HANDLES[0],
        "public_key": stranger.public_key_b64,
        "created_at": "2026-11-29T10:00:00Z",
    }
    register(envelope.envelope_bytes(envelope.sign(payload, envelope.REGISTRATION_TYPE, [stranger])))
    with pytest.raises(CommandError, match="the ingest refused a demo envelope"):
        call_command("seed_demo", stdout=StringIO())
    assert not Contributor.objects.get(handle=demo.HANDLES[0]).is_demo


def test_it_asks_for_migrate_when_the_campaign_is_missing(db: None) -> None:
    Campaign.objects.all().delete()
    with pytest.raises(CommandError, match=r"run `manage\.py migrate` first"):
        call_command("seed_demo", stdout=StringIO())


def test_an_older_releases_demo_rows_get_one_sentence_not_a_nonce_conflict(
    live_campaign: Campaign, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Demo rows of another release (here another agent version) hold the same keys and nonces
    with other bytes: the command says to start from an empty database."""
    first = demo.DemoRun(demo.HANDLES[0], demo.CHIPS[0], demo.MODELS[0], 0, demo.Trouble())
    monkeypatch.setattr(demo, "demo_runs", lambda: [first])
    monkeypatch.setattr(demo, "agent_version", lambda: "0.0.1")
    call_command("seed_demo", stdout=StringIO())
    monkeypatch.undo()
    monkeypatch.setattr(demo, "demo_runs", lambda: [first])
    with pytest.raises(CommandError, match="older release") as raised:
        call_command("seed_demo", stdout=StringIO())
    assert "db.sqlite3" in str(raised.value)
