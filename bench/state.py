"""Large stored states for the growth and read benchmarks, written with COPY (not through the API).

Rows are those the ingest path writes (bench/copyrows.py), raw envelopes included and really
signed, so a rebuild from envelopes works on them. Two processes generate and COPY in parallel.
"""

from __future__ import annotations

import base64
import json
import multiprocessing
import random
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
from benchhub_agent import envelope

from bench import copyrows, payloads

CONTRIBUTORS = 2000
BATCH = 2000
START = datetime(2026, 1, 1, tzinfo=UTC)


def fast_canonical(obj: Any) -> bytes:
    """Equal to RFC 8785 for these payloads (ASCII keys, non-integral floats between 1e-4 and 1e16);
    checked against the real canonicaliser on the first payloads of every worker."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def _contributors(connection: psycopg.Connection[Any], count: int) -> list[tuple[int, int]]:
    """(key id, contributor id) per persona index, created once per database."""
    rows = connection.execute(
        "SELECT k.id, k.contributor_id, c.handle FROM accounts_publickey k JOIN accounts_contributor c "
        "ON c.id = k.contributor_id WHERE c.handle LIKE 'crowd-%%'"
    ).fetchall()
    known = {int(handle.removeprefix("crowd-")): (key, contributor) for key, contributor, handle in rows}
    with connection.transaction():
        for index in range(count):
            if index in known:
                continue
            signer = payloads.persona(100_000 + index)
            contributor = connection.execute(
                "INSERT INTO accounts_contributor (handle, is_demo, created_at) VALUES (%s, false, now()) RETURNING id",
                [f"crowd-{index}"],
            ).fetchone()[0]  # type: ignore[index]
            key = connection.execute(
                "INSERT INTO accounts_publickey (keyid, public_key, banned, created_at, contributor_id) "
                "VALUES (%s, %s, false, now(), %s) RETURNING id",
                [signer.keyid, signer.public_key, contributor],
            ).fetchone()[0]  # type: ignore[index]
            known[index] = (key, contributor)
    return [known[index] for index in range(count)]


def _worker(job: tuple[str, int, int, int, int, dict[str, Any]]) -> int:
    import django

    django.setup()  # a spawned process: copyrows reads the machine identity fields from the service
    database_url, first, count, seed, campaign_id, context = job
    rng = random.Random(seed)
    variants = [payloads.VariantSpec(**spec) for spec in context["variants"]]
    keys: list[tuple[int, int]] = context["keys"]
    signers = [payloads.persona(100_000 + index) for index in range(len(keys))]
    lookups = copyrows.Lookups(campaign_id, context["machines"], context["models"])
    written = 0
    with psycopg.connect(database_url, autocommit=True) as connection:
        ids = {table: copyrows.IdBlock(connection, table, 50_000) for table in copyrows.ID_TABLES}
        while written < count:
            batch = []
            with connection.transaction(), connection.cursor() as cursor:
                for _ in range(min(BATCH, count - written)):
                    content = payloads.payload(rng, variants)
                    body = fast_canonical(content)
                    if written < 20 and body != envelope.canonical_bytes(content):
                        raise RuntimeError("the fast canonical form differs from RFC 8785 for a generated payload")
                    persona = rng.randrange(len(keys))
                    signed = {
                        "payload": base64.b64encode(body).decode(),
                        "payloadType": envelope.SUBMISSION_TYPE,
                        "signatures": [signers[persona].signature(envelope.SUBMISSION_TYPE, body)],
                    }
                    refs = (
                        campaign_id,
                        copyrows.machine_id(cursor, lookups, content["machine"]),
                        copyrows.model_id(cursor, lookups, content["model"]),
                    )
                    batch.append(
                        copyrows.rows_of(
                            content,
                            fast_canonical(signed),
                            copyrows.sha256_hex(body),
                            key=keys[persona],
                            refs=refs,
                            ids=ids,
                            received_at=START + timedelta(seconds=30 * (first + written)),
                            refreshed=True,
                        )
                    )
                    written += 1
                copyrows.copy_rows(cursor, batch)
    return written


def grow(database_url: str, target: int, processes: int = 2) -> None:
    """Add generated submissions until the database holds `target`, then refresh every cell."""
    from benchhub.results import campaigns, cells
    from benchhub.results.models import Campaign

    campaign = Campaign.objects.get(slug=payloads.CAMPAIGN)
    names = campaigns.campaign_patch_names(campaign.definition)
    hashes = {name: campaigns.patch_file(name).sha256 or "" for name in names}
    variants = payloads.campaign_variants(campaign.definition, hashes)
    with psycopg.connect(database_url, autocommit=True) as connection:
        have = connection.execute("SELECT count(*) FROM results_submission").fetchone()[0]  # type: ignore[index]
        keys = _contributors(connection, CONTRIBUTORS)
        lookups = copyrows.Lookups(campaign.pk)
        with connection.cursor() as cursor:
            for chip, cores, memory in payloads.CHIPS:
                facts = payloads.payload(random.Random(0), variants)["machine"]
                facts.update(chip=chip, gpu_name=chip, gpu_cores=cores, memory_bytes=memory * 2**30)
                copyrows.machine_id(cursor, lookups, facts)
            for model_name, architecture, n_params in payloads.MODELS:
                for quant in payloads.QUANTS:
                    model = payloads.payload(random.Random(0), variants)["model"]
                    model.update(payloads.model_facts(model_name, architecture, n_params, quant))
                    copyrows.model_id(cursor, lookups, model)
    missing = target - have
    if missing <= 0:
        print(f"   state: {have} submissions already (target {target})", flush=True)
        return
    context = {
        "variants": [vars(variant) for variant in variants],
        "keys": keys,
        "machines": lookups.machines,
        "models": lookups.models,
    }
    share = -(-missing // processes)
    jobs = [
        (database_url, have + index * share, min(share, missing - index * share), have + index, campaign.pk, context)
        for index in range(processes)
        if missing - index * share > 0
    ]
    started = time.perf_counter()
    with multiprocessing.get_context("spawn").Pool(len(jobs)) as pool:
        written = sum(pool.map(_worker, jobs))
    loaded = time.perf_counter() - started
    with psycopg.connect(database_url, autocommit=True) as connection:
        connection.execute("VACUUM ANALYZE")
    started = time.perf_counter()
    refreshed = cells.refresh_all_cells()
    print(
        f"   state: wrote {written} submissions with COPY in {loaded:.0f} s ({written / loaded:.0f}/s, "
        f"{processes} processes); refreshed {refreshed} cells in {time.perf_counter() - started:.1f} s",
        flush=True,
    )
