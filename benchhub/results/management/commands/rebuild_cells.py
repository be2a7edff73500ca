import os
import time
from typing import Any

import psycopg
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import connection, transaction

from benchhub.results import bulk, cells, fresh_tables, storage
from benchhub.results.models import (
    CorrectnessCheck,
    GenerationCheck,
    LeaderboardCell,
    Measurement,
    RawEnvelope,
    Submission,
    SubmissionVariant,
    SweepRow,
    SweepRun,
)

CHUNK = 500


class Command(BaseCommand):
    help = (
        "Re-derive every submission's measurements from its stored raw envelope (with --all-rows, every "
        "normalised row: variants, sweep runs and rows, checks), then recompute every leaderboard cell. Safe "
        "to run at any time and to run again after a crash; moderation state (hidden) is kept. Works in "
        "chunks of submissions, one transaction each, so memory stays bounded whatever the table size. On "
        "PostgreSQL the chunks are written with COPY by worker processes into fresh tables, which are indexed "
        "and then swapped in for the live ones under a short lock; the site and the ingest keep working "
        "meanwhile, and a crash before the swap leaves the live tables as they were. On SQLite every row is "
        "rewritten in place."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--chunk", type=int, default=CHUNK, help=f"submissions per transaction (default {CHUNK})")
        parser.add_argument(
            "--workers",
            type=int,
            default=(os.cpu_count() or 1) + 1,
            help="worker processes on PostgreSQL, for the rows and then the cells (default: one per CPU and one more, "
            "to use a core while another worker waits on the database; 1 works in this process)",
        )
        parser.add_argument(
            "--all-rows",
            action="store_true",
            help="write every normalised row again, not only the measurements (the rows the rules make): after a "
            "change to how an envelope is normalised, or to repair those tables",
        )

    def handle(self, *args: Any, chunk: int, workers: int, all_rows: bool, **options: Any) -> None:
        started = time.perf_counter()
        if connection.vendor == "postgresql":
            try:
                rebuilt = bulk.rebuild_all(workers, chunk, all_rows)
            except (fresh_tables.RebuildRefused, LookupError) as error:  # LookupError: a row to derive from is missing
                raise CommandError(str(error)) from None
            except psycopg.errors.LockNotAvailable:
                raise CommandError(
                    "Another session held the derived tables through every try to swap the rebuilt ones in "
                    "(about two minutes); nothing live was changed, so run it again."
                ) from None
            count, steps = rebuilt.submissions, rebuilt.seconds
            caught = f"{rebuilt.caught_up} received or changed meanwhile derived again; "
        else:
            # The rows are rewritten in place: refreshes meanwhile read their groups in full.
            LeaderboardCell.objects.update(order_state=None)
            count, steps, caught = self._rebuild_with_the_orm(chunk), {}, ""
        rows_done = time.perf_counter()
        refreshed = cells.refresh_all_cells(workers)
        steps = {**(steps or {"rows": rows_done - started}), "cells": time.perf_counter() - rows_done}
        self.stdout.write(
            f"Rebuilt {count} submission(s) and {refreshed} cell(s) from the raw envelopes ({caught}"
            + ", ".join(f"{step} {value:.1f} s" for step, value in steps.items())
            + f"; {time.perf_counter() - started:.1f} s in all)."
        )

    def _rebuild_with_the_orm(self, chunk: int) -> int:
        count = 0
        after = None
        while True:
            submissions = Submission.objects.select_related("machine", "model_file").order_by("pk")
            if after is not None:
                submissions = submissions.filter(pk__gt=after)
            batch = list(submissions[:chunk])
            if not batch:
                return count
            self._rebuild_chunk(batch)
            count += len(batch)
            after = batch[-1].pk

    @transaction.atomic
    def _rebuild_chunk(self, submissions: list[Submission]) -> None:
        ids = [submission.pk for submission in submissions]
        bodies = dict(RawEnvelope.objects.filter(submission_id__in=ids).values_list("submission_id", "body"))
        # Leaves first: without dependants each is one DELETE (Django's fast delete); deleting the
        # variants first would make the ORM load every dependent row to cascade it.
        SweepRow.objects.filter(run__submission_id__in=ids).delete()
        for model in (Measurement, CorrectnessCheck, GenerationCheck, SweepRun, SubmissionVariant):
            model.objects.filter(submission_id__in=ids).delete()
        storage.store_many(
            [(submission, storage.stored_payload(bytes(bodies[submission.pk]))) for submission in submissions]
        )
