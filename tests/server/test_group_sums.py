"""The refresh tallies a group's rows in SQL (results/group_sums.py) and judges the counted ones with
stats; here its cells and headlines must equal stats.page_stats on the same rows read into Python
row by row, within 1e-9 relative, on random groups with every rule in play: even machine counts and
ties, keys on probation, held submissions, every exclusion, non-standard rows, odd numbers, and
machines missing a headline size."""

from __future__ import annotations

import math
import random
import uuid
from dataclasses import asdict
from datetime import timedelta
from typing import Any

import pytest
from benchhub_protocol import envelope, stats
from django.utils import timezone

from benchhub.accounts.models import Contributor, PublicKey
from benchhub.results import board, cells
from benchhub.results.campaigns import campaign_rules, headline_sizes
from benchhub.results.models import Headline, LeaderboardCell, Measurement, ModelFile, Submission
from tests.conftest import Api, build_payload

pytestmark = pytest.mark.django_db

VARIANTS = ("upstream", "01", "01+02")
PROBATION_S = 3600
REASONS = (*Measurement.COUNTED_EXCLUSIONS, Measurement.Excluded.NONSTANDARD)


def odd_number(rng: random.Random, typical: float) -> float | None:
    """Mostly a few repeated values (ties, even counts), sometimes a spread one, rarely a bad one."""
    draw = rng.random()
    if draw < 0.01:
        return rng.choice([None, 0.0, -1.0, math.inf, math.nan])
    if draw < 0.5:
        return typical * rng.choice([0.98, 1.0, 1.05])
    return typical * rng.lognormvariate(0.02, 0.05)


def random_group(template: Submission, group: board.Group, sizes: list[int], rng: random.Random) -> None:
    """Copies of the template submission, each from a random key, with random measurement rows."""
    contributors = [Contributor.objects.create(handle=f"c{uuid.uuid4().hex[:12]}") for _ in range(3)]
    keys = [
        PublicKey.objects.create(keyid=uuid.uuid4().hex, public_key=b"\0" * 32, contributor=rng.choice(contributors))
        for _ in range(rng.choice([6, 9, 12, 20]))
    ]
    now = timezone.now()
    for index, key in enumerate(keys):  # a quarter of the keys still on probation
        age = timedelta(minutes=10) if index % 4 == 1 else timedelta(days=2)
        PublicKey.objects.filter(pk=key.pk).update(created_at=now - age)
    variants = {variant.name: variant for variant in template.variants.all()}
    arrivals = [now - timedelta(minutes=rng.randrange(5)) for _ in range(3)]  # arrivals tie
    rows = []
    for _ in range(rng.randrange(20, 50)):
        key = rng.choice(keys)
        copy = Submission.objects.get(pk=template.pk)
        copy.pk = uuid.uuid4()
        copy.key, copy.contributor = key, key.contributor
        copy.nonce, copy.payload_sha256, copy.measured_sha256 = uuid.uuid4().hex, uuid.uuid4().hex, uuid.uuid4().hex
        copy.chip, copy.gpu_cores = group.chip, group.gpu_cores
        copy.model_held = rng.random() < 0.15
        claim = ModelFile.objects.get(pk=template.model_file_id)  # its label shows which submission names a cell
        claim.pk, claim.fingerprint, claim.label = None, uuid.uuid4().hex, f"named by {copy.pk}"
        claim.save()
        copy.model_file = claim
        copy.save()
        Submission.objects.filter(pk=copy.pk).update(received_at=rng.choice(arrivals))
        commit = "c" if rng.random() < 0.9 else "d"  # another build of the same variants
        missing = rng.choice(sizes) if rng.random() < 0.2 else None  # a size this submission lacks
        for name in VARIANTS:
            reason = "" if rng.random() < 0.8 else rng.choice(REASONS)
            for size in sizes:
                if size == missing:
                    continue
                rows.append(
                    Measurement(
                        submission=copy,
                        variant=variants[name],
                        campaign_id=copy.campaign_id,
                        contributor=key.contributor,
                        key=key,
                        chip=copy.chip,
                        gpu_cores=copy.gpu_cores,
                        model_sha256=copy.model_sha256,
                        backend=copy.backend,
                        quant=copy.quant,
                        variant_name=name,
                        commit=commit,
                        batch_size=size,
                        n_rounds=2,
                        tg_tps=None,
                        baseline_tg_tps=odd_number(rng, 100.0),
                        speedup=odd_number(rng, 1.0 if name == "upstream" else 1.3),
                        log_se=None if rng.random() < 0.01 else rng.choice([0.0, 0.004, 0.01 * rng.random()]),
                        se_df=rng.choice([1, 2, 5]),
                        n_cycles=rng.choice([1, 2, 3, 6]),
                        correctness_status="pass",
                        excluded_reason=reason if rng.random() < 0.97 else rng.choice(REASONS),
                    )
                )
    Measurement.objects.bulk_create(rows)


def python_cells(group: board.Group, held: bool) -> tuple[dict[Any, dict[str, Any]], dict[Any, stats.HeadlineStats]]:
    """The group's cells as the refresh computed them before group_sums: every row read into Python,
    the rules applied row by row, then stats.page_stats."""
    definition = group_campaign(group).definition
    since = timezone.now() - timedelta(seconds=PROBATION_S)
    submissions = {
        submission.pk: submission
        for submission in Submission.objects.filter(**group.filter()).select_related("model_file")
    }
    found: dict[Any, dict[str, Any]] = {}
    page: dict[tuple[str, str, int], list[stats.Row]] = {}
    for row in (
        Measurement.objects.filter(**group.filter())
        .select_related("key")
        .exclude(excluded_reason=Measurement.Excluded.NONSTANDARD)
    ):
        key = (row.variant_name, row.commit, row.batch_size)
        tally = found.setdefault(
            key, {"excluded": dict.fromkeys(Measurement.COUNTED_EXCLUSIONS, 0), "pending": set(), "first": None}
        )
        page.setdefault(key, [])
        submission = submissions[row.submission_id]
        reason = row.excluded_reason
        if reason not in ("hidden", "withdrawn") and held and submission.model_held:
            reason = "held"
        counted = False
        if reason:
            tally["excluded"][reason] += 1
        elif row.key.created_at > since:
            tally["pending"].add(row.key_id)
        elif row.speedup is not None and row.baseline_tg_tps is not None and row.log_se is not None:
            numbers = (row.speedup, row.baseline_tg_tps, row.log_se, row.se_df, row.n_cycles)
            page[key].append(stats.Row(row.key_id, row.contributor_id, *numbers))
            counted = True
        arrival = (not counted, submission.received_at, submission.pk)
        if tally["first"] is None or arrival < tally["first"]:
            tally["first"] = arrival
    rules = campaign_rules(definition)
    judged = stats.page_stats(page, headline_sizes=headline_sizes(definition), min_effect=rules.min_effect)
    for key, tally in found.items():
        named_by = submissions[tally["first"][2]]
        tally.update(asdict(judged.cells[key]), n_pending=len(tally.pop("pending")), model=named_by.model_file.label)
        del tally["first"]
    return found, judged.headlines


def group_campaign(group: board.Group) -> Any:
    from benchhub.results.models import Campaign

    return Campaign.objects.get(pk=group.campaign_id)


def same(mine: Any, theirs: Any) -> bool:
    if isinstance(theirs, float) and isinstance(mine, float):
        return math.isclose(mine, theirs, rel_tol=1e-9, abs_tol=1e-12)
    return bool(mine == theirs)


def test_the_sql_reduction_gives_page_stats_numbers(api: Api, ada: envelope.Signer, settings: Any) -> None:
    settings.BENCHHUB_KEY_PROBATION_S = PROBATION_S
    response = api.submit(build_payload(tg={name: {1: [100.0, 100.0]} for name in VARIANTS}), ada)
    assert response.status_code == 201, response.json()
    template = Submission.objects.get(pk=response.json()["id"])
    sizes = [1, *headline_sizes(template.campaign.definition)]
    seen: list[Any] = []
    for seed in range(10):
        rng = random.Random(seed)
        group = board.Group(template.campaign_id, f"chip {seed}", 20, template.model_sha256, template.backend)
        random_group(template, group, sizes, rng)
        held = seed % 2 == 0
        expected_cells, expected_headlines = python_cells(group, held)
        found_cells, found_headlines = cells.compute_cells(group, held=held)

        assert {(c.variant, c.commit, c.batch_size) for c in found_cells} == set(expected_cells)
        for cell in found_cells:
            expected = expected_cells[(cell.variant, cell.commit, cell.batch_size)]
            for name, value in expected.items():
                assert same(getattr(cell, name), value), (seed, cell.variant, cell.commit, cell.batch_size, name)
        assert {(h.variant, h.commit) for h in found_headlines} == set(expected_headlines)
        for headline in found_headlines:
            for name, value in asdict(expected_headlines[(headline.variant, headline.commit)]).items():
                assert same(getattr(headline, name), value), (seed, headline.variant, headline.commit, name)
        seen += [*found_cells, *found_headlines]

    # The seeds cover what the rules have to get right.
    found = [found for found in seen if isinstance(found, LeaderboardCell)]
    assert any(cell.n_machines >= 4 and cell.n_machines % 2 == 0 for cell in found), "an even count of machines"
    assert any(cell.n_pending for cell in found) and any(cell.excluded["held"] for cell in found)
    assert all(any(cell.excluded[reason] for cell in found) for reason in Measurement.COUNTED_EXCLUSIONS)
    assert {cell.verdict for cell in found} >= {"faster", "too few machines"}
    assert any(found.n_machines >= 3 for found in seen if isinstance(found, Headline))
