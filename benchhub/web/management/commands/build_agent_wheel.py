"""`manage.py build_agent_wheel`: build the agent's wheel from agent/ into the folder the site serves
it from (/agent/<wheel>). Exit codes: 0 built; 1 pip failed (its message on stderr)."""

from __future__ import annotations

import subprocess
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from benchhub.web import wheel


class Command(BaseCommand):
    help = "Build the benchhub-agent wheel the site serves at /agent/."

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            built = wheel.build()
        except (subprocess.CalledProcessError, FileNotFoundError) as error:
            raise CommandError(f"could not build the agent wheel: {error}") from error
        self.stdout.write(f"built {built}")
