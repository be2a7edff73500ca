"""`python -m bench <what>`: prints each figure with its conditions. See docs/performance.md.

state     grow --database to --size submissions through ingest_submission, then refresh every group
ingest    clients -> gunicorn + PostgreSQL + Celery worker and beat: accepted/s (target 1)
latency   one client at --rate/s on --database: from a 201 to the cell on the leaderboard API (target 2)
reads     read latencies and CSV memory on --database (target 3)
rebuild   manage.py rebuild_cells on --database (target 4), then one refresh of its largest group
group     one group of --machines machines built in --database, its refresh timed
agent     the agent's own time on the real CPU end to end, run twice (target 5)
validity  error rates of the verdicts by simulation with a known truth (docs/method.md); --quick, --write
snapshot  write_snapshot on --database, then its file served to a slow client through nginx + gunicorn
clone     --database as --copies copies of --source's state in SQL, new keys per copy, cells recomputed
scaleout  N = 1, 2, 4, 8 gunicorn workers and Celery processes on one PostgreSQL (bench/scaleout.py; own options)
drill     a service of --size submissions, its snapshot, a fresh database restored from it: cells and pages compared
all       state, ingest, latency, reads and rebuild, each a process of its own

Django reads its database once per process: every step of `all` is a `python -m bench` process.
The databases are named bh_perf_after_*: states of the schema before cells v2 (bh_perf_1k,
bh_perf_100k) cannot be migrated to it, and the bench never touches them.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys

HOST = "postgres://postgres@127.0.0.1:5432"
DEFAULT_REDIS = "redis://127.0.0.1:6379/9"
STATIC_ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results", "static")
VERBS = ("state", "ingest", "latency", "reads", "rebuild", "group", "agent", "validity", "clone", "snapshot", "all")


def ensure_database(url: str) -> None:
    """Create the bench database if absent and migrate it (the bench never touches another one)."""
    import psycopg

    base, name = url.rsplit("/", 1)
    if not name.startswith("bh_perf_"):
        raise SystemExit(f"the bench only uses databases named bh_perf_*, not {name}")
    with psycopg.connect(f"{base}/postgres", autocommit=True) as connection:
        if not connection.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone():
            connection.execute(f'CREATE DATABASE "{name}"')
    environment = {**os.environ, "DATABASE_URL": url}
    subprocess.run([sys.executable, "manage.py", "migrate", "--noinput", "-v0"], check=True, env=environment)
    # Pages need the hashed static manifest once DEBUG is off, as in production.
    subprocess.run([sys.executable, "manage.py", "collectstatic", "--noinput", "-v0"], check=True, env=environment)


def setup(database: str, redis: str) -> None:
    os.environ["DJANGO_STATIC_ROOT"] = STATIC_ROOT
    os.environ["DATABASE_URL"] = database
    os.environ["REDIS_URL"] = redis
    os.environ["CELERY_QUEUE"] = "benchhub-bench-in-process"  # never a queue a real worker consumes
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "benchhub.settings")
    os.environ.setdefault("DJANGO_SECRET_KEY", "bench-in-process-only")  # DEBUG off: no query log growing
    os.environ.setdefault("DJANGO_SECURE_SSL_REDIRECT", "false")
    os.environ.setdefault("DJANGO_ALLOWED_HOSTS", "127.0.0.1,testserver")
    # The bench measures the work, not the limits.
    for throttle in ("ADDRESS", "KEY", "READ", "EXPORT", "NETWORK", "REGISTRATIONS"):
        os.environ.setdefault(f"BENCHHUB_THROTTLE_{throttle}", "100000000/hour")
    # A state's keys and the bench's crowd are registered when they are built: on probation (24 h when
    # deployed) every row they sign would wait uncounted, and no cell would count a machine.
    os.environ.setdefault("BENCHHUB_KEY_PROBATION_S", "0")
    ensure_database(database)
    import django

    django.setup()
    from benchhub.results.campaigns import sync_campaigns
    from benchhub.results.models import Campaign

    sync_campaigns(Campaign)


def steps(options: argparse.Namespace) -> list[list[str]]:
    """The `python -m bench` runs that `all` is made of, in order."""
    state = f"{HOST}/bh_perf_after_{options.size // 1000}k"
    common = ["--redis", options.redis]
    return [
        ["state", "--database", state, "--size", str(options.size), *common],
        ["ingest", "--database", f"{HOST}/bh_perf_after_ingest", *common],
        ["latency", "--database", state, *common],
        ["reads", "--database", state, *common],
        ["rebuild", "--database", state, *common],
    ]


def arguments() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m bench", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("what", choices=VERBS)
    parser.add_argument("--database", default=os.environ.get("BENCH_DATABASE_URL", f"{HOST}/bh_perf_after_100k"))
    parser.add_argument("--redis", default=os.environ.get("BENCH_REDIS_URL", DEFAULT_REDIS))
    parser.add_argument("--size", type=int, default=100_000, help="stored submissions for state (and all)")
    parser.add_argument("--processes", type=int, default=2, help="state: ingesting processes")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--per-round", type=int, default=300)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--web-workers", type=int, default=3)
    parser.add_argument("--rate", type=float, default=10.0, help="latency: submissions per second")
    parser.add_argument(
        "--seconds", type=int, default=60, help="latency: how long to send; snapshot: how long the slow download lasts"
    )
    parser.add_argument("--repeats", type=int, default=30, help="reads: requests per endpoint")
    parser.add_argument("--machines", type=int, default=10_000, help="group: machines in the synthetic group")
    parser.add_argument("--no-csv", dest="csv", action="store_false", help="reads: leave out the CSV export")
    parser.add_argument("--source", default=f"{HOST}/bh_perf_after_100k", help="clone: the state copied (read only)")
    parser.add_argument("--copies", type=int, default=10, help="clone: how many times over")
    return parser


def main() -> None:
    if sys.argv[1:2] == ["validity"]:  # pure simulation: no database, its own options
        from bench import validity

        raise SystemExit(validity.run(sys.argv[2:]))
    if sys.argv[1:2] == ["drill"]:  # its own databases, steps and options
        from bench import drill

        raise SystemExit(drill.main(sys.argv[2:]))
    if sys.argv[1:2] == ["scaleout"]:  # its own states, steps and options
        from bench import scaleout

        raise SystemExit(scaleout.main(sys.argv[2:]))
    options = arguments().parse_args()
    if options.what == "agent":
        from bench import agent_costs

        agent_costs.run()
        return
    if options.what == "all":
        for step in steps(options):
            subprocess.run([sys.executable, "-m", "bench", *step], check=True)
        return
    if options.what == "clone":
        from bench import clone

        clone.run(options.source, options.database, options.copies)
        setup(options.database, options.redis)
        clone.refresh()
        return
    setup(options.database, options.redis)
    from bench import big_group, ingest, latency, reads, rebuild, snapshot, state

    {
        "state": lambda: state.grow(options.size, options.processes),
        "ingest": lambda: ingest.run(
            options.database,
            options.redis,
            rounds=options.rounds,
            per_round=options.per_round,
            clients=options.clients,
            web_workers=options.web_workers,
        ),
        "latency": lambda: latency.run(
            options.database, options.redis, rate=options.rate, seconds=options.seconds, web_workers=options.web_workers
        ),
        "reads": lambda: reads.run(options.repeats, options.csv),
        "rebuild": rebuild.run,
        "group": lambda: big_group.run(options.machines),
        "snapshot": lambda: snapshot.run(options.database, options.redis, options.seconds, options.web_workers),
    }[options.what]()


if __name__ == "__main__":
    main()
