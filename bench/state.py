"""Large stored states for the growth and read benchmarks, written with COPY (not through the API).

Rows are those the ingest path writes (bench/copyrows.py: the product's derivation and COPY writer),
raw envelopes included and really signed, so a rebuild from envelopes works on them. Two processes
generate and COPY in parallel.
"""

from __future__ import annotations

import base64
import multiprocessing
import random
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
from benchhub_agent import envelope

from bench import payloads, storage

CONTRIBUTORS = 2000
BATCH = 2000
# Above this many submissions a state is the generated one multiplied in SQL (`clone`): generating a
# million signed envelopes in Python takes over an hour on 2 cores.
GENERATED_MAX = 100_000
# 30 s apart, a million submissions span 347 days from here: all received before the benchmarks'
# own, so the time-ordered ids of those land after every stored one, as they would in service.
START = datetime(2025, 12, 1, tzinfo=UTC)


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


def _worker(job: tuple[str, int, int, int, dict[str, Any]]) -> int:
    import django

    django.setup()  # a spawned process: DJANGO_SETTINGS_MODULE and DATABASE_URL come from the environment
    from bench import copyrows  # the service's models: only once Django is set up

    database_url, first, count, seed, context = job
    rng = random.Random(seed)
    variants = [payloads.VariantSpec(**spec) for spec in context["variants"]]
    keys: list[tuple[int, int]] = context["keys"]
    signers = [payloads.persona(100_000 + index) for index in range(len(keys))]
    lookups = copyrows.Lookups(
        context["campaign_id"], context["campaign_sweep"], context["machines"], context["models"]
    )
    written = 0
    with psycopg.connect(database_url, autocommit=True) as connection:
        while written < count:
            batch = []
            for _ in range(min(BATCH, count - written)):
                content = payloads.payload(rng, variants)
                body = envelope.canonical_bytes(content)
                persona = rng.randrange(len(keys))
                signed = {
                    "payload": base64.b64encode(body).decode(),
                    "payloadType": envelope.SUBMISSION_TYPE,
                    "signatures": [signers[persona].signature(envelope.SUBMISSION_TYPE, body)],
                }
                batch.append(
                    copyrows.submission_rows(
                        content,
                        envelope.canonical_bytes(signed),
                        copyrows.sha256_hex(body),
                        key=keys[persona],
                        lookups=lookups,
                        received_at=START + timedelta(seconds=30 * (first + written)),
                        refreshed=True,
                    )
                )
                written += 1
            with connection.transaction(), connection.cursor() as cursor:
                copyrows.write(cursor, batch)
    return written


def grow(database_url: str, target: int, processes: int = 2) -> None:
    """Bring the database to `target` submissions, then refresh every cell: generated ones up to
    GENERATED_MAX, copies of those beyond (target must then be a multiple of GENERATED_MAX)."""
    if target <= GENERATED_MAX:
        generate(database_url, target, processes)
        return
    if target % GENERATED_MAX:
        raise SystemExit(f"--size above {GENERATED_MAX} must be a multiple of it (the generated state is cloned)")
    with psycopg.connect(database_url, autocommit=True) as connection:
        have = connection.execute("SELECT count(*) FROM results_submission").fetchone()[0]  # type: ignore[index]
    if have < GENERATED_MAX:
        generate(database_url, GENERATED_MAX, processes)
        have = GENERATED_MAX
    if have != target:
        if have != GENERATED_MAX:
            raise SystemExit(f"{have} submissions stored: a cloned state grows from exactly {GENERATED_MAX}")
        started = time.perf_counter()
        clone(database_url, target // GENERATED_MAX - 1)
        print(f"   state: cloned to {target} in {time.perf_counter() - started:.0f} s", flush=True)
    _refresh(f"{target} submissions")


def generate(database_url: str, target: int, processes: int = 2) -> None:
    """Add generated submissions until the database holds `target`, then refresh every cell."""
    from bench import copyrows
    from benchhub.results import campaigns
    from benchhub.results.models import Campaign

    campaign = Campaign.objects.get(slug=payloads.CAMPAIGN)
    names = campaigns.campaign_patch_names(campaign.definition)
    hashes = {name: campaigns.patch_file(name).sha256 or "" for name in names}
    variants = payloads.campaign_variants(campaign.definition, hashes)
    with psycopg.connect(database_url, autocommit=True) as connection:
        have = connection.execute("SELECT count(*) FROM results_submission").fetchone()[0]  # type: ignore[index]
        keys = _contributors(connection, CONTRIBUTORS)
    lookups = copyrows.Lookups(campaign.pk, campaign.definition["sweep"])
    for chip, cores, memory in payloads.CHIPS:
        facts = payloads.payload(random.Random(0), variants)["machine"]
        facts.update(chip=chip, gpu_name=chip, gpu_cores=cores, memory_bytes=memory * 2**30)
        copyrows.machine_id(lookups, facts)
    for model_name, architecture, n_params in payloads.MODELS:
        for quant in payloads.QUANTS:
            model = payloads.payload(random.Random(0), variants)["model"]
            model.update(payloads.model_facts(model_name, architecture, n_params, quant))
            copyrows.model_id(lookups, model)
    missing = target - have
    if missing <= 0:
        _refresh(f"{have} submissions already (target {target})")
        return
    context = {
        "variants": [vars(variant) for variant in variants],
        "keys": keys,
        "campaign_id": lookups.campaign_id,  # plain values: the job is unpickled before django.setup()
        "campaign_sweep": lookups.campaign_sweep,
        "machines": lookups.machines,
        "models": lookups.models,
    }
    share = -(-missing // processes)
    jobs = [
        (database_url, have + index * share, min(share, missing - index * share), have + index, context)
        for index in range(processes)
        if missing - index * share > 0
    ]
    started = time.perf_counter()
    with multiprocessing.get_context("spawn").Pool(len(jobs)) as pool:
        written = sum(pool.map(_worker, jobs))
    loaded = time.perf_counter() - started
    with psycopg.connect(database_url, autocommit=True) as connection:
        connection.execute("VACUUM ANALYZE")
    _refresh(
        f"wrote {written} submissions with COPY in {loaded:.0f} s ({written / loaded:.0f}/s, {processes} processes)"
    )


def _refresh(what: str) -> None:
    from django.db import connection

    from benchhub.results import cells
    from benchhub.results.models import CellBand, LeaderboardCell

    started = time.perf_counter()
    refreshed = cells.refresh_all_cells()
    print(f"   state: {what}; refreshed {refreshed} cells in {time.perf_counter() - started:.1f} s", flush=True)
    # The pass rewrote every cell and band: leave them as autovacuum would (bench/vacuum.py).
    with connection.cursor() as cursor:
        cursor.execute(f"VACUUM (ANALYZE) {LeaderboardCell._meta.db_table}, {CellBand._meta.db_table}")


CLONE_STEPS = (
    "DROP TABLE IF EXISTS clone_map",  # the previous copy's, all copies being one transaction
    """CREATE TEMP TABLE clone_map ON COMMIT DROP AS
       SELECT id AS old, (lpad(to_hex((extract(epoch FROM received_at + %(shift)s) * 1000)::bigint), 12, '0')
              || '7' || substr(md5(random()::text), 1, 3) || '8' || substr(md5(random()::text), 1, 15))::uuid AS new
       FROM results_submission WHERE received_at < %(cutoff)s""",
    """INSERT INTO results_submission
       SELECT m.new, md5(m.new::text), encode(sha256(m.new::text::bytea), 'hex'), s.created_at,
              s.received_at + %(shift)s, s.status, s.hidden, s.flags, s.is_demo, s.agent_name, s.agent_version,
              s.power_source, s.low_power_mode, s.thermal, s.llama_cpp, s.sweep_settings,
              s.cells_refreshed_at + %(shift)s, s.campaign_id, s.contributor_id, s.key_id, s.machine_id,
              s.model_file_id, s.chip, s.gpu_cores, s.quant
       FROM results_submission s JOIN clone_map m ON m.old = s.id""",
    """INSERT INTO results_rawenvelope SELECT m.new, r.body, r.sha256, r.received_at + %(shift)s
       FROM results_rawenvelope r JOIN clone_map m ON m.old = r.submission_id""",
    """INSERT INTO results_submissionvariant SELECT v.id + %(variants)s, v.position, v.name, v.commit, v.patches,
       v.env, m.new FROM results_submissionvariant v JOIN clone_map m ON m.old = v.submission_id""",
    """INSERT INTO results_sweeprun SELECT r.id + %(runs)s, r.rep, r.seq, r.exit_code, m.new,
       r.variant_id + %(variants)s FROM results_sweeprun r JOIN clone_map m ON m.old = r.submission_id""",
    """INSERT INTO results_sweeprow (batch_size, pp_tps, tg_tps, t_pp_s, t_tg_s, run_id)
       SELECT w.batch_size, w.pp_tps, w.tg_tps, w.t_pp_s, w.t_tg_s, w.run_id + %(runs)s
       FROM results_sweeprow w WHERE w.run_id <= %(max_run)s""",
    """INSERT INTO results_correctnesscheck (tool, op, backend, status, passed, failed, reason, submission_id,
       variant_id) SELECT c.tool, c.op, c.backend, c.status, c.passed, c.failed, c.reason, m.new,
       c.variant_id + %(variants)s FROM results_correctnesscheck c JOIN clone_map m ON m.old = c.submission_id""",
    """INSERT INTO results_generationcheck (prompt_id, n_tokens, output_sha256, degenerate, repetition_score,
       identical_to_baseline, submission_id, variant_id) SELECT g.prompt_id, g.n_tokens, g.output_sha256,
       g.degenerate, g.repetition_score, g.identical_to_baseline, m.new, g.variant_id + %(variants)s
       FROM results_generationcheck g JOIN clone_map m ON m.old = g.submission_id""",
    """INSERT INTO results_measurement (chip, gpu_cores, quant, variant_name, batch_size, tg_tps, baseline_tg_tps,
       speedup, spread, n_reps, correctness_status, excluded_reason, campaign_id, contributor_id, cell_key_id,
       submission_id, variant_id) SELECT x.chip, x.gpu_cores, x.quant, x.variant_name, x.batch_size, x.tg_tps,
       x.baseline_tg_tps, x.speedup, x.spread, x.n_reps, x.correctness_status, x.excluded_reason, x.campaign_id,
       x.contributor_id, x.cell_key_id, m.new, x.variant_id + %(variants)s
       FROM results_measurement x JOIN clone_map m ON m.old = x.submission_id""",
)


# The indexes of the tables the clone writes (a submission's, storage.PER_SUBMISSION_TABLES) that
# back no constraint: dropped for the copies and built again after them (sorted, instead of ~30
# million random inserts into value-ordered indexes larger than memory: over an hour on 2 cores).
REBUILT_INDEXES = """SELECT i.indexrelid::regclass::text, pg_get_indexdef(i.indexrelid) FROM pg_index i
    JOIN pg_class t ON t.oid = i.indrelid
    WHERE t.relname = ANY(%s) AND NOT EXISTS (SELECT FROM pg_constraint c WHERE c.conindid = i.indexrelid)
    ORDER BY 1"""


def clone(database_url: str, copies: int) -> None:
    """Multiply a generated state in SQL (minutes instead of an hour of Python on 2 cores): every
    copy has fresh submission ids, nonces, payload hashes and received_at, and byte copies of the
    originals' envelopes and rows. Only for sizes the Python generator cannot reach in time.

    One transaction: the indexes that back no constraint are dropped, the copies written, and the
    indexes built again from their stored definitions, so an interrupted clone leaves the state as
    it was. Built by CREATE INDEX, those indexes are packed (leaf pages 90% full) where indexes
    grown by random inserts settle near 70%: the storage figures of a cloned state say so."""
    with psycopg.connect(database_url, autocommit=True) as connection:
        cutoff, span = connection.execute(
            "SELECT max(received_at) + interval '1 second', max(received_at) - min(received_at) + interval '1 hour' "
            "FROM results_submission"
        ).fetchone()  # type: ignore[misc]
        max_variant = connection.execute("SELECT max(id) FROM results_submissionvariant").fetchone()[0]  # type: ignore[index]
        max_run = connection.execute("SELECT max(id) FROM results_sweeprun").fetchone()[0]  # type: ignore[index]
        with connection.transaction():
            # The copies reference rows that exist by construction: without this, the deferred
            # foreign-key checks of ~10 million rows ran at COMMIT for longer than the inserts.
            connection.execute("SET LOCAL session_replication_role = replica")
            connection.execute("SET LOCAL maintenance_work_mem = '1GB'")
            rebuilt = connection.execute(REBUILT_INDEXES, [list(storage.PER_SUBMISSION_TABLES)]).fetchall()
            for name, _ in rebuilt:
                connection.execute(f"DROP INDEX {name}")
            for copy in range(1, copies + 1):
                started = time.perf_counter()
                values = {
                    "cutoff": cutoff,
                    "shift": span * copy,
                    "variants": max_variant * copy,
                    "runs": max_run * copy,
                    "max_run": max_run,
                }
                for step in CLONE_STEPS:
                    connection.execute(step, values)
                print(f"   clone {copy}/{copies}: {time.perf_counter() - started:.0f} s", flush=True)
            started = time.perf_counter()
            for _, definition in rebuilt:
                connection.execute(definition)
            print(f"   clone: {len(rebuilt)} indexes built in {time.perf_counter() - started:.0f} s", flush=True)
        for table in ("results_submissionvariant", "results_sweeprun"):  # the ids the copies shifted
            connection.execute(f"SELECT setval(pg_get_serial_sequence('{table}', 'id'), (SELECT max(id) FROM {table}))")
        connection.execute("VACUUM ANALYZE")
