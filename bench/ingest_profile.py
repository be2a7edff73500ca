"""`python -m bench.ingest_profile [--count N] [--database URL]`: where one submission's time goes in
the web process, and the in-process floor beside it (issue 46, docs/performance.md).

N realistic signed submissions (bench/payloads.py) are posted through Django's test client (the real
URL routing, middleware, DRF view, throttles and ingest; Celery messages go to Redis as deployed) under
cProfile, after a warm-up. The profile's cumulative times are grouped by stage. The floor is the work a
submission needs and nothing else, timed the same way in the same process: verify the signature over
the exact bytes, parse the canonical payload, validate it, and insert its rows.
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import random
import time
from typing import Any

from bench import payloads

# (label, (file fragment, function name)): the stages, each by the function that does it.
STAGES = (
    ("whole request (test client)", ("django/test/client.py", "post")),
    ("ingest_submission", ("results/ingest.py", "ingest_submission")),
    ("  verify envelope + signature", ("results/ingest.py", "verify")),
    ("  canonical parse", ("benchhub_protocol/envelope.py", "parse_canonical_payload")),
    ("  schema", ("benchhub_protocol/schema.py", "validate_submission")),
    ("  near copy lookup", ("results/copies.py", "near_copy")),
    ("  campaign check", ("results/ingest.py", "check_against_campaign")),
    ("  server flags", ("results/flags.py", "derive")),
    ("  store rows (transaction)", ("results/ingest.py", "_store")),
    ("    normalised rows", ("results/storage.py", "store_rows")),
    ("    measurements", ("results/measurements.py", "measurement_rows")),
    ("  on commit: queue refresh", ("results/tasks.py", "queue_refresh")),
    ("  on commit: claims", ("results/tasks.py", "after_claim")),
    ("throttles", ("api/throttling.py", "allow_request")),
)


def cumulative(stats: pstats.Stats, fragment: str, name: str) -> float:
    total = 0.0
    for (filename, _, function), (_, _, _, cumulative_s, _) in stats.stats.items():  # type: ignore[attr-defined]
        if function == name and filename.replace("\\", "/").endswith(fragment):
            total = max(total, cumulative_s)  # recursion and re-entry count once
    return total


def bodies(count: int, signers: list[Any], seed: int) -> list[bytes]:
    from benchhub_protocol.payloads import signed_submission

    from bench.state import variants

    rng = random.Random(seed)
    found = variants()
    return [signed_submission(payloads.payload(rng, found), rng.choice(signers)) for _ in range(count)]


def floor_ms(body: bytes, store: bool = True) -> float:
    """The work a submission needs: verify, parse, validate, and (`store`) insert its rows, rolled back."""
    from benchhub_protocol import envelope, schema
    from django.db import transaction

    from benchhub.results import ingest

    started = time.perf_counter()
    verified = ingest.verify(body)
    payload = envelope.parse_canonical_payload(verified.opened.payload)
    schema.validate_submission(payload)
    if not store:
        return (time.perf_counter() - started) * 1000
    with transaction.atomic():
        campaign, version = ingest.check_against_campaign(payload)
        ingest._store(verified, payload, "f" * 64, campaign, version)
        transaction.set_rollback(True)
    return (time.perf_counter() - started) * 1000


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.ingest_profile")
    parser.add_argument("--count", type=int, default=200)
    parser.add_argument("--database", default="postgres://postgres@127.0.0.1:5432/bh_perf_profile")
    parser.add_argument("--redis", default="redis://127.0.0.1:6379/9")
    options = parser.parse_args(argv)
    from bench.__main__ import setup

    setup(options.database, options.redis)
    from benchhub_protocol.payloads import signed_registration
    from django.test import Client

    client = Client()
    signers = [payloads.persona(index) for index in range(16)]
    for index, signer in enumerate(signers):
        client.post(
            "/api/v1/contributors/", signed_registration(signer, f"bench-{index}"), content_type="application/json"
        )
    warm, measured = (
        bodies(20, signers, seed=int(time.time())),
        bodies(options.count, signers, seed=int(time.time()) + 1),
    )
    for body in warm:
        client.post("/api/v1/submissions/", body, content_type="application/json")
    profiler = cProfile.Profile(time.process_time)  # CPU of this process: other load on the machine does not count
    started = time.perf_counter()
    profiler.enable()
    statuses = [
        client.post("/api/v1/submissions/", body, content_type="application/json").status_code for body in measured
    ]
    profiler.disable()
    wall = time.perf_counter() - started
    stats = pstats.Stats(profiler)
    floors = sorted(floor_ms(body) for body in bodies(50, signers, seed=7))
    count = len(measured)
    print(f"{count} submissions through the test client, {statuses.count(201)} accepted; load {os.getloadavg()[0]:.1f}")
    print(f"wall {1000 * wall / count:.1f} ms a submission, profiled; the stages below are CPU ms of this process")
    for label, (fragment, name) in STAGES:
        print(f"  {label:34} {1000 * cumulative(stats, fragment, name) / count:7.2f} ms")
    floor = floors[len(floors) // 2]
    print(f"in-process floor (verify, parse, validate, insert; median of 50): {floor:.2f} ms = {1000 / floor:.0f}/s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
