"""Every environment variable the service reads, in one table with its default and meaning.

settings.py reads each through this table (a name not in it is a programming error), and a value
that does not parse stops the start with the variable named: `DJANGO_DEBUG=yes please` is refused,
never read as False. `.env.example` is written from the table (`python -m benchhub.environment
> .env.example`), and tests/server/test_environment.py checks that it is current. Pure Python: no
Django but its exception, so the docs test can read a default without the suite's own settings.
"""

from __future__ import annotations

import os
import sys
import textwrap
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from django.core.exceptions import ImproperlyConfigured

BASE_DIR = Path(__file__).resolve().parent.parent
TRUE, FALSE = ("1", "true", "yes", "on"), ("0", "false", "no", "off")


class BadVariable(ImproperlyConfigured):
    """A value the service cannot read: the start stops with this sentence."""


@dataclass(frozen=True)
class Variable:
    name: str
    default: str  # as it would be written in the environment; "{base}" is the checkout; "": empty or unset
    meaning: str
    kind: str = "text"  # text, int, float, bool, list (comma-separated), path
    debug_default: str | None = None  # the default with DJANGO_DEBUG=1, where it differs
    example: str | None = None  # the value .env.example sets; None: shown commented out, at its default
    compose_only: bool = False  # read by docker-compose.yml, not by the service


VARIABLES = (
    Variable(
        "DJANGO_SECRET_KEY",
        "",
        "Required unless DJANGO_DEBUG=1: a random value of your own "
        "(python -c 'import secrets; print(secrets.token_urlsafe(50))'). This placeholder is refused.",
        example="change-me-to-50-random-characters-from-secrets.token_urlsafe",
    ),
    Variable(
        "DJANGO_DEBUG",
        "0",
        "1 only for development: the embedded default (SQLite, Celery tasks in-process), `make run` and the tests.",
        "bool",
    ),
    Variable(
        "DJANGO_ALLOWED_HOSTS",
        "localhost,127.0.0.1,[::1],testserver",
        "The host names the site answers to.",
        "list",
        example="benchhub.example.org",
    ),
    Variable(
        "DJANGO_CSRF_TRUSTED_ORIGINS",
        "",
        "Origins trusted for the admin's forms behind a proxy.",
        "list",
        example="https://benchhub.example.org",
    ),
    Variable(
        "POSTGRES_PASSWORD",
        "",
        "The compose stack's PostgreSQL password (docker-compose.yml builds DATABASE_URL from it).",
        example="change-me",
        compose_only=True,
    ),
    Variable(
        "POSTGRES_SHARED_BUFFERS",
        "1GB",
        "PostgreSQL's buffers in the compose stack: they hold the refresh's bands (`bench storage` lists "
        "their size) and the indexes' hot pages; within about a quarter of the database machine's memory.",
        example="1GB",
        compose_only=True,
    ),
    Variable(
        "DATABASE_URL",
        "sqlite:///{base}/db.sqlite3",
        "Set by docker-compose.yml for its own services; elsewhere postgres://user:password@host:5432/benchhub.",
    ),
    Variable("DATABASE_CONN_MAX_AGE", "60", "Seconds a database connection is kept for the next request.", "int"),
    Variable(
        "REDIS_URL",
        "",
        "Set by docker-compose.yml for its own services; elsewhere redis://host:6379/0. Unset: tasks run "
        "in-process and throttles count per process.",
    ),
    Variable(
        "DJANGO_SECURE_PROXY_SSL_HEADER",
        "false",
        "true behind a TLS-terminating proxy that sets X-Forwarded-Proto (and drops one a client sent), as "
        "docker-compose.yml's gunicorn on 127.0.0.1 expects; leave it unset where no such proxy stands in front.",
        "bool",
        example="true",
    ),
    Variable(
        "BENCHHUB_TRUSTED_PROXY_COUNT",
        "0",
        "How many reverse proxies append to X-Forwarded-For (0: trust only the connection's address).",
        "int",
        example="1",
    ),
    Variable("DJANGO_SECURE_SSL_REDIRECT", "true", "Redirect HTTP to HTTPS (DEBUG off only).", "bool"),
    Variable("DJANGO_HSTS_SECONDS", "31536000", "Strict-Transport-Security max-age (DEBUG off only).", "int"),
    Variable("DJANGO_STATIC_ROOT", "{base}/staticfiles", "Where collectstatic writes the static files.", "path"),
    Variable("DJANGO_LOG_LEVEL", "INFO", "The root logger's level.", "text"),
    Variable("BENCHHUB_MAX_BODY_BYTES", "1048576", "The largest request body accepted (413 above it).", "int"),
    Variable("BENCHHUB_THROTTLE_ADDRESS", "120/hour", "Writes per client address.", "text"),
    Variable("BENCHHUB_THROTTLE_KEY", "60/hour", "Submissions per key.", "text"),
    Variable("BENCHHUB_THROTTLE_NETWORK", "10/hour", "Registrations per network (IPv4 /24, IPv6 /64 and /48).", "text"),
    Variable("BENCHHUB_THROTTLE_REGISTRATIONS", "300/hour", "Registrations for everyone together.", "text"),
    Variable(
        "BENCHHUB_THROTTLE_READ", "120/minute", "Per client address: the API's list pages and leaderboard.", "text"
    ),
    Variable("BENCHHUB_THROTTLE_EXPORT", "10/hour", "Per client address: the CSV export.", "text"),
    Variable(
        "BENCHHUB_ADMIN_LOGIN_FAILURES",
        "5",
        "Wrong admin passwords before an address is locked out for an hour.",
        "int",
    ),
    Variable(
        "BENCHHUB_KEY_PROBATION_S",
        "86400",
        "Seconds a new key's results wait before they enter the cells (0: at once).",
        "int",
        debug_default="0",
    ),
    Variable(
        "BENCHHUB_CLOCK_SKEW_S", "300", "How far in the future a payload's created_at may lie, in seconds.", "int"
    ),
    Variable(
        "BENCHHUB_SWEEPER_INTERVAL_SECONDS",
        "60",
        "How often Celery beat re-queues submissions whose cells are not yet refreshed.",
        "float",
    ),
    Variable(
        "BENCHHUB_SWEEPER_GRACE_SECONDS",
        "60",
        "How long after its arrival a submission with unrefreshed cells is re-queued by the sweeper.",
        "int",
    ),
    Variable(
        "BENCHHUB_BOARD_MAX_STALENESS_SECONDS",
        "2",
        "How long a board (leaderboard API, home and chip pages) may be served after its cells changed "
        "(0: never stale).",
        "float",
        debug_default="0",
    ),
    Variable(
        "BENCHHUB_SNAPSHOT_INTERVAL_SECONDS",
        "3600",
        "How often the worker publishes the public snapshot (docs/api.md).",
        "float",
    ),
    Variable(
        "BENCHHUB_SNAPSHOT_DIR", "{base}/snapshots", "Where the snapshot files and their index are written.", "path"
    ),
    Variable(
        "BENCHHUB_SNAPSHOT_ACCEL_REDIRECT",
        "",
        "With nginx in front (docker-compose.yml): the internal location that sends the snapshot files, "
        "such as /_snapshot-files/.",
    ),
    Variable(
        "BENCHHUB_PUBLIC_URL",
        "http://127.0.0.1:8000",
        "The site's own URL, which makes the snapshot's patch links absolute.",
    ),
    Variable("BENCHHUB_PATCHES_DIR", "{base}/patches", "Where the campaigns' patch files are served from.", "path"),
    Variable(
        "BENCHHUB_AGENT_WHEEL_DIR",
        "{base}/build/agent-wheel",
        "Where the agent wheel served at /agent/ is built.",
        "path",
    ),
    Variable("CELERY_QUEUE", "benchhub", "The Celery queue the tasks go to.", "text"),
    Variable(
        "CELERY_VISIBILITY_TIMEOUT_SECONDS",
        "600",
        "After this long a task taken by a worker that died is delivered again; keep it above the longest task.",
        "int",
    ),
    Variable(
        "CELERY_TASK_ACKS_LATE",
        "true",
        "Acknowledge a task when it is done, so a killed worker's task runs again (off only to show a "
        "reliability test failing).",
        "bool",
    ),
)
BY_NAME = {variable.name: variable for variable in VARIABLES}


def raw(name: str, environ: Mapping[str, str] | None = None, *, debug: bool = False) -> str:
    """The variable's text: the environment's, else its default (with DEBUG on, its debug default).
    An empty value of a number or a boolean (`DJANGO_SECURE_PROXY_SSL_HEADER=` in a .env) is unset."""
    variable = BY_NAME[name]  # a name not in the table is a programming error
    value = (os.environ if environ is None else environ).get(name)
    if value is not None and (value.strip() or variable.kind in ("text", "list", "path")):
        return value
    default = variable.debug_default if debug and variable.debug_default is not None else variable.default
    return default.replace("{base}", str(BASE_DIR))


def text(name: str, environ: Mapping[str, str] | None = None, *, debug: bool = False) -> str:
    return raw(name, environ, debug=debug)


def integer(name: str, environ: Mapping[str, str] | None = None, *, debug: bool = False) -> int:
    value = raw(name, environ, debug=debug)
    try:
        return int(value)
    except ValueError:
        raise BadVariable(f"{name}={value!r} is not a whole number.") from None


def number(name: str, environ: Mapping[str, str] | None = None, *, debug: bool = False) -> float:
    value = raw(name, environ, debug=debug)
    try:
        return float(value)
    except ValueError:
        raise BadVariable(f"{name}={value!r} is not a number.") from None


def boolean(name: str, environ: Mapping[str, str] | None = None, *, debug: bool = False) -> bool:
    value = raw(name, environ, debug=debug).strip().lower()
    if value in TRUE:
        return True
    if value in FALSE:
        return False
    raise BadVariable(f"{name}={value!r} is not a boolean: write {', '.join(TRUE)} or {', '.join(FALSE)}.")


def listed(name: str, environ: Mapping[str, str] | None = None, *, debug: bool = False) -> list[str]:
    return [item.strip() for item in raw(name, environ, debug=debug).split(",") if item.strip()]


def path(name: str, environ: Mapping[str, str] | None = None, *, debug: bool = False) -> Path:
    return Path(raw(name, environ, debug=debug))


READERS = {"text": text, "int": integer, "float": number, "bool": boolean, "list": listed, "path": path}


def default(name: str, *, debug: bool = False) -> object:
    """The value a variable takes when unset, as its kind reads it."""
    return READERS[BY_NAME[name].kind](name, {}, debug=debug)


HEADER = """\
# Written by `python -m benchhub.environment > .env.example` from benchhub/environment.py, the table of
# every variable the service reads; tests/server/test_environment.py checks it is current.
# Copy to .env for docker compose. With DJANGO_DEBUG=1 and nothing else the service runs on the
# embedded default (SQLite, Celery tasks in-process): `make run`. Lines set below are what a deployment
# behind a TLS proxy needs; the others show their default, commented out. A value that does not parse
# (DJANGO_DEBUG=yes please) stops the start with the variable named.
"""


def env_example() -> str:
    blocks = []
    for variable in VARIABLES:
        meaning = textwrap.wrap(variable.meaning, 100, initial_indent="# ", subsequent_indent="# ")
        if variable.debug_default is not None:
            meaning.append(f"# (with DJANGO_DEBUG=1 the default is {variable.debug_default})")
        shown = variable.default.replace("{base}", ".")
        line = f"{variable.name}={variable.example}" if variable.example is not None else f"# {variable.name}={shown}"
        blocks.append("\n".join([*meaning, line]))
    return HEADER + "\n" + "\n\n".join(blocks) + "\n"


if __name__ == "__main__":
    sys.stdout.write(env_example())
