"""Every environment variable in one table (benchhub/environment.py): settings.py reads nothing
else, .env.example is the table written out, and a value that does not parse stops the start with
the variable named."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from benchhub import environment

ROOT = Path(__file__).resolve().parents[2]


def test_env_example_is_the_table_written_out() -> None:
    assert (ROOT / ".env.example").read_text() == environment.env_example(), (
        "run python -m benchhub.environment > .env.example"
    )


def test_settings_read_every_variable_of_the_table_and_no_other() -> None:
    settings = (ROOT / "benchhub" / "settings.py").read_text()
    assert "os.environ" not in settings and "getenv" not in settings
    read = set(re.findall(r"env\.\w+\(\s*\"([A-Z_0-9]+)\"", settings))
    service = {variable.name for variable in environment.VARIABLES if not variable.compose_only}
    assert read == service
    compose = (ROOT / "docker-compose.yml").read_text()
    assert all(f"${{{v.name}" in compose for v in environment.VARIABLES if v.compose_only)


def test_every_variable_says_what_it_means() -> None:
    assert all(len(variable.meaning.split()) >= 3 for variable in environment.VARIABLES)
    assert len(environment.BY_NAME) == len(environment.VARIABLES)


@pytest.mark.parametrize(
    ("name", "value", "words"),
    [
        ("DJANGO_DEBUG", "yes please", "is not a boolean"),
        ("BENCHHUB_KEY_PROBATION_S", "a day", "is not a whole number"),
        ("BENCHHUB_BOARD_MAX_STALENESS_SECONDS", "2s", "is not a number"),
    ],
)
def test_it_refuses_a_value_it_cannot_read(name: str, value: str, words: str) -> None:
    with pytest.raises(environment.BadVariable, match=f"^{name}='{value}' {words}"):
        environment.READERS[environment.BY_NAME[name].kind](name, {name: value})


def test_it_reads_the_spellings_it_documents() -> None:
    assert [environment.boolean("DJANGO_DEBUG", {"DJANGO_DEBUG": word}) for word in ("1", "Yes", " on ", "true")] == [
        True
    ] * 4
    assert not any(environment.boolean("DJANGO_DEBUG", {"DJANGO_DEBUG": word}) for word in ("0", "no", "OFF", "false"))
    assert environment.default("DJANGO_DEBUG") is False
    assert environment.boolean("DJANGO_SECURE_SSL_REDIRECT", {"DJANGO_SECURE_SSL_REDIRECT": ""}) is True  # unset
    assert environment.integer("BENCHHUB_CLOCK_SKEW_S", {"BENCHHUB_CLOCK_SKEW_S": " "}) == 300


def test_the_service_does_not_start_on_a_junk_boolean() -> None:
    env = {"PATH": os.environ["PATH"], "HOME": os.environ.get("HOME", "/tmp"), "DJANGO_DEBUG": "yes please"}
    done = subprocess.run(
        [sys.executable, "manage.py", "check"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode != 0
    assert "DJANGO_DEBUG='yes please' is not a boolean" in done.stderr, done.stderr[-2000:]
