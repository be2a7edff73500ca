"""`python -m bench <what>`: prints each figure with its conditions. See docs/performance.md."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys

DEFAULT_DATABASE = "postgres://postgres@127.0.0.1:5432/bh_perf"
DEFAULT_REDIS = "redis://127.0.0.1:6379/5"


def ensure_database(url: str) -> None:
    """Create the bench database if absent and migrate it (the bench never touches another one)."""
    import psycopg

    base, name = url.rsplit("/", 1)
    with psycopg.connect(f"{base}/postgres", autocommit=True) as connection:
        if not connection.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone():
            connection.execute(f'CREATE DATABASE "{name}"')
    environment = {**os.environ, "DATABASE_URL": url}
    subprocess.run([sys.executable, "manage.py", "migrate", "--noinput", "-v0"], check=True, env=environment)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument("what", choices=["ingest", "profile", "all"])
    parser.add_argument("--database", default=os.environ.get("BENCH_DATABASE_URL", DEFAULT_DATABASE))
    parser.add_argument("--redis", default=os.environ.get("BENCH_REDIS_URL", DEFAULT_REDIS))
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--per-round", type=int, default=400)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--web-workers", type=int, default=3)
    options = parser.parse_args()

    ensure_database(options.database)
    os.environ["DATABASE_URL"] = options.database
    os.environ["REDIS_URL"] = options.redis
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "benchhub.settings")
    os.environ.setdefault("DJANGO_SECRET_KEY", "bench-in-process-only")  # DEBUG off: no query log growing
    os.environ.setdefault("DJANGO_SECURE_SSL_REDIRECT", "false")
    os.environ.setdefault("DJANGO_ALLOWED_HOSTS", "127.0.0.1,testserver")
    os.environ.setdefault("BENCHHUB_THROTTLE_ADDRESS", "100000000/hour")
    os.environ.setdefault("BENCHHUB_THROTTLE_KEY", "100000000/hour")
    import django

    django.setup()
    from bench import ingest

    ingest.campaign_ready()
    if options.what in ("ingest", "all"):
        ingest.run(
            options.database,
            options.redis,
            rounds=options.rounds,
            per_round=options.per_round,
            clients=options.clients,
            web_workers=options.web_workers,
        )
    if options.what in ("profile", "all"):
        ingest.profile(200)


if __name__ == "__main__":
    main()
