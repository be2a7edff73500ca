"""A bench state of --size submissions: signed envelopes made in process and written a batch per
transaction with bulk_create, as the rows `ingest_submission` stores (ingest.py `_store` and
storage.py, whose row builders this calls), then every group's cells recomputed as a worker would.

Not through `ingest_submission` itself: on 2 shared cores it stores ~10 submissions a second (about
17 round trips to PostgreSQL each), so 100k would take hours; batches skip the per-submission
verification and round trips, not what is stored."""

from __future__ import annotations

import hashlib
import json
import multiprocessing
import random
import time
from typing import Any

from benchhub_protocol import envelope
from benchhub_protocol.payloads import signed_submission

from bench import payloads
from bench.figures import report

CONTRIBUTORS = 2000
# A persona index range of its own, so the state's keys never collide with the ingest bench's crowd.
PERSONA_BASE = 100_000
BATCH = 250


def crowd_keys(count: int) -> list[Any]:
    """The state's contributors' keys, registered once per database (rows as `register` writes them)."""
    from benchhub.accounts.models import Contributor, PublicKey

    signers = [payloads.persona(PERSONA_BASE + index) for index in range(count)]
    known = set(PublicKey.objects.filter(keyid__in=[s.keyid for s in signers]).values_list("keyid", flat=True))
    missing = [(index, signer) for index, signer in enumerate(signers) if signer.keyid not in known]
    contributors = Contributor.objects.bulk_create(Contributor(handle=f"crowd-{index}") for index, _ in missing)
    PublicKey.objects.bulk_create(
        PublicKey(keyid=signer.keyid, public_key=signer.public_key, contributor=contributor)
        for (_, signer), contributor in zip(missing, contributors, strict=True)
    )
    by_keyid = PublicKey.objects.select_related("contributor").in_bulk([s.keyid for s in signers], field_name="keyid")
    return [by_keyid[signer.keyid] for signer in signers]


def variants() -> list[payloads.VariantSpec]:
    from benchhub.results.models import Campaign

    return payloads.campaign_variants(Campaign.objects.get(slug=payloads.CAMPAIGN).definition)


class Writer:
    """Rows of many submissions per transaction; machine, model file and group rows looked up once."""

    def __init__(self) -> None:
        from benchhub.results.models import Campaign

        self.campaign = Campaign.objects.get(slug=payloads.CAMPAIGN)
        self.machines: dict[str, Any] = {}
        self.models: dict[str, Any] = {}
        self.groups: set[Any] = set()

    def submission(self, key: Any, payload: dict[str, Any], body: bytes) -> Any:
        """The unsaved Submission that ingest stores for this payload."""
        from benchhub.results import ingest, storage

        machine = payload["machine"]
        machine_key = json.dumps(machine, sort_keys=True)
        if machine_key not in self.machines:
            self.machines[machine_key] = storage.machine_row(machine)
        model_key = json.dumps(payload["model"], sort_keys=True)
        if model_key not in self.models:
            self.models[model_key] = storage.model_file_row(payload["model"])
        model_file = self.models[model_key]
        opened = envelope.open_envelope(json.loads(body), envelope.SUBMISSION_TYPE)
        payload_sha256 = hashlib.sha256(opened.payload).hexdigest()
        return ingest.submission_row(
            key, payload, payload_sha256, self.campaign, self.machines[machine_key], model_file
        )

    def write(self, batch: list[tuple[Any, dict[str, Any], bytes]]) -> None:
        """One transaction: the submissions, their raw envelopes and every normalised row."""
        from django.db import transaction

        from benchhub.results import board, cells, storage
        from benchhub.results.measurements import measurement_rows
        from benchhub.results.models import Measurement, RawEnvelope, Submission

        submissions = [self.submission(*item) for item in batch]
        # Each group's lock row first, committed on its own: two writers creating the same ones inside
        # their batch transactions deadlock on the unique index.
        for group in sorted({board.Group.of(submission) for submission in submissions} - self.groups, key=repr):
            cells.ensure_group(group)
            self.groups.add(group)
        with transaction.atomic():
            Submission.objects.bulk_create(submissions)
            RawEnvelope.objects.bulk_create(
                RawEnvelope(submission=submission, body=body, sha256=hashlib.sha256(body).hexdigest())
                for submission, (_, _, body) in zip(submissions, batch, strict=True)
            )
            variants = storage.store_rows(
                [(submission, payload) for submission, (_, payload, _) in zip(submissions, batch, strict=True)]
            )
            Measurement.objects.bulk_create(
                row
                for submission, (_, payload, _) in zip(submissions, batch, strict=True)
                for row in measurement_rows(submission, payload, variants[submission.pk])
            )


def _worker(job: tuple[int, int]) -> int:
    """A spawned process: DJANGO_SETTINGS_MODULE and DATABASE_URL come from the environment."""
    import django

    django.setup()
    count, seed = job
    rng = random.Random(seed)
    specs = variants()
    keys = crowd_keys(CONTRIBUTORS)
    signers = {key.keyid: payloads.persona(PERSONA_BASE + index) for index, key in enumerate(keys)}
    writer = Writer()
    written = 0
    while written < count:
        batch = []
        for _ in range(min(BATCH, count - written)):
            key = rng.choice(keys)
            content = payloads.payload(rng, specs)
            batch.append((key, content, signed_submission(content, signers[key.keyid])))
        writer.write(batch)
        written += len(batch)
    return written


def grow(target: int, processes: int) -> None:
    """Write submissions until the database holds `target`, then refresh every group's cells."""
    from django.db import connection

    from benchhub.results import cells
    from benchhub.results.models import Submission

    have = Submission.objects.count()
    missing = target - have
    lines = []
    if missing > 0:
        crowd_keys(CONTRIBUTORS)
        share = -(-missing // processes)
        jobs = [(min(share, missing - index * share), int(time.time()) + index) for index in range(processes)]
        started = time.perf_counter()
        with multiprocessing.get_context("spawn").Pool(processes) as pool:
            written = sum(pool.map(_worker, [job for job in jobs if job[0] > 0]))
        seconds = time.perf_counter() - started
        lines.append(
            f"wrote {written} submissions in batches of {BATCH} with bulk_create, {processes} processes: "
            f"{seconds:.0f} s ({written / seconds:.1f}/s)"
        )
    else:
        lines.append(f"{have} submissions already stored (target {target})")
    started = time.perf_counter()
    refreshed = cells.refresh_all_cells()
    seconds = time.perf_counter() - started
    lines.append(f"refresh_all_cells: {refreshed} cells of {len(cells.all_groups())} groups in {seconds:.1f} s")
    with connection.cursor() as cursor:
        cursor.execute("VACUUM ANALYZE")  # the server here runs without autovacuum
    report(f"state: {Submission.objects.count()} submissions", lines)
