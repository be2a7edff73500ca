"""`python -m bench <what>`: prints each figure with its conditions. See docs/performance.md.

ingest    4 clients -> gunicorn + PostgreSQL + Celery worker, beside the floor (target 1)
profile   where an in-process ingest spends its time (pyinstrument)
writers   ingest CPU with the COPY row writer against the ORM one, alternating in one process
state     grow the database to --size submissions with COPY
refresh   cell refresh per submission (target 2)
reads     read latencies, EXPLAIN and CSV memory (target 3)
reads-under-ingest  home page and leaderboard API while cells keep changing, staleness bound 0 and 5 s (target 3)
storage   bytes per submission (target 5)
rebuild   manage.py rebuild_cells from the raw envelopes (target 4; --all-rows: every normalised row)
agent     the agent's own time on the real CPU end to end, run twice (target 6)
agent-cold  the same in a fresh agent home: each variant's cold build and the ratio to the first (target 6)
throttles  what the two ingest throttles cost a request, and whether they hold under concurrency
bands     what keeping one cell's bands costs as values arrive, no database (target 2)
growth    ingest and refresh on bh_perf_1k and on --database, alternating 1k, large, large, 1k (target 2)
all       both states, growth between them, profile at 1k, reads and storage at --size

Django reads its database once per process: every step of `growth` and `all` is a `python -m bench`
process of its own.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys

HOST = "postgres://postgres@127.0.0.1:5432"
DEFAULT_REDIS = "redis://127.0.0.1:6379/5"
STATIC_ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results", "static")
VERBS = (
    "ingest",
    "profile",
    "writers",
    "state",
    "refresh",
    "reads",
    "reads-under-ingest",
    "storage",
    "rebuild",
    "agent",
    "agent-cold",
    "throttles",
    "bands",
    "growth",
    "all",
)
SMALL = f"{HOST}/bh_perf_1k"
_configured_for: str | None = None


def ensure_database(url: str) -> None:
    """Create the bench database if absent and migrate it (the bench never touches another one)."""
    import psycopg

    base, name = url.rsplit("/", 1)
    with psycopg.connect(f"{base}/postgres", autocommit=True) as connection:
        if not connection.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone():
            connection.execute(f'CREATE DATABASE "{name}"')
    environment = {**os.environ, "DATABASE_URL": url}
    subprocess.run([sys.executable, "manage.py", "migrate", "--noinput", "-v0"], check=True, env=environment)
    # Pages need the hashed static manifest once DEBUG is off, as in production.
    subprocess.run([sys.executable, "manage.py", "collectstatic", "--noinput", "-v0"], check=True, env=environment)


def claim_database(database: str) -> None:
    """One database per process: Django reads DATABASE_URL once, so a second one would be ignored and
    the step would measure the first (how `all` once read the large state's figures off the 1k one)."""
    global _configured_for
    if _configured_for not in (None, database):
        raise RuntimeError(f"this process measures {_configured_for}; run {database} as its own python -m bench")
    _configured_for = database


def _setup(database: str, redis: str) -> None:
    claim_database(database)
    os.environ["DJANGO_STATIC_ROOT"] = STATIC_ROOT
    os.environ["DATABASE_URL"] = database
    os.environ["REDIS_URL"] = redis
    os.environ["CELERY_QUEUE"] = "benchhub-bench-in-process"  # never a queue a real worker consumes
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "benchhub.settings")
    os.environ.setdefault("DJANGO_SECRET_KEY", "bench-in-process-only")  # DEBUG off: no query log growing
    os.environ.setdefault("DJANGO_SECURE_SSL_REDIRECT", "false")
    os.environ.setdefault("DJANGO_ALLOWED_HOSTS", "127.0.0.1,testserver")
    os.environ.setdefault("BENCHHUB_THROTTLE_ADDRESS", "100000000/hour")
    os.environ.setdefault("BENCHHUB_THROTTLE_KEY", "100000000/hour")
    os.environ.setdefault("BENCHHUB_THROTTLE_READ", "100000000/hour")
    os.environ.setdefault("BENCHHUB_THROTTLE_EXPORT", "100000000/hour")
    ensure_database(database)
    import django

    django.setup()
    from bench import ingest

    ingest.campaign_ready()


def steps(options: argparse.Namespace) -> list[list[str]]:
    """The `python -m bench` runs that `growth` (or `all`) is made of, in order."""
    large = options.database if options.what == "growth" else f"{HOST}/bh_perf_{options.size // 1000}k"
    passed = ["--redis", options.redis, "--rounds", str(options.rounds), "--per-round", str(options.per_round)]
    passed += ["--clients", str(options.clients), "--web-workers", str(options.web_workers)]
    passed += ["--repeats", str(options.repeats), *([] if options.csv else ["--no-csv"])]

    def step(verb: str, database: str, *extra: str) -> list[str]:
        return [verb, "--database", database, *extra, *passed]

    # Alternating, so the two states see the same machine: the growth figures are the two medians.
    growth = [step(verb, database) for database in (SMALL, large, large, SMALL) for verb in ("ingest", "refresh")]
    if options.what == "growth":
        return growth
    return [
        step("state", SMALL, "--size", "1000"),
        step("state", large, "--size", str(options.size)),
        *growth,
        step("profile", SMALL),
        step("reads", large),
        step("storage", large),
    ]


def arguments() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m bench", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("what", choices=VERBS)
    parser.add_argument("--database", default=os.environ.get("BENCH_DATABASE_URL", f"{HOST}/bh_perf"))
    parser.add_argument("--redis", default=os.environ.get("BENCH_REDIS_URL", DEFAULT_REDIS))
    parser.add_argument("--size", type=int, default=100_000, help="stored submissions for state (and all)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--per-round", type=int, default=300)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--web-workers", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=30, help="requests per read endpoint")
    parser.add_argument(
        "--no-csv", dest="csv", action="store_false", help="reads: leave out the CSV export (~10 min at 1M)"
    )
    parser.add_argument(
        "--all-rows", action="store_true", help="rebuild: every normalised row, not only the measurements"
    )
    return parser


def main() -> None:
    options = arguments().parse_args()

    from bench import agent_costs, bands, ingest, reads, reads_under_ingest, refresh, state, storage, throttles, writers

    if options.what == "agent":
        agent_costs.run()
        return
    if options.what == "agent-cold":
        agent_costs.run_cold()
        return
    if options.what == "throttles":  # Redis only, no database
        throttles.run(options.redis)
        return
    if options.what == "bands":  # pure Python
        bands.run()
        return

    def ingest_run(database: str) -> None:
        ingest.run(
            database,
            options.redis,
            rounds=options.rounds,
            per_round=options.per_round,
            clients=options.clients,
            web_workers=options.web_workers,
        )

    if options.what in ("growth", "all"):
        for step in steps(options):
            subprocess.run([sys.executable, "-m", "bench", *step], check=True)
        return
    _setup(options.database, options.redis)
    {
        "ingest": lambda: ingest_run(options.database),
        "profile": lambda: ingest.profile(200),
        "writers": lambda: writers.run(),
        "state": lambda: state.grow(options.database, options.size),
        "refresh": lambda: refresh.run(50),
        "reads": lambda: reads.run(options.repeats, explain=True, csv=options.csv),
        "reads-under-ingest": lambda: reads_under_ingest.run(rounds=10, per_round=5),
        "storage": lambda: storage.run(options.database),
        "rebuild": lambda: refresh.rebuild(options.database, options.all_rows),
    }[options.what]()


if __name__ == "__main__":
    main()
