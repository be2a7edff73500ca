"""`manage.py serve [ADDR:PORT]`: the development server of `make run`, whose last line is the URL to
open (runserver's banner ends with a warning that hid it). Static files are served as runserver does."""

from __future__ import annotations

import logging
from typing import Any

from django.contrib.staticfiles.management.commands.runserver import Command as RunserverCommand


class Command(RunserverCommand):
    help = "Start the development server (make run) and print the URL to open last."

    def run(self, **options: Any) -> None:
        # "Watching for file changes", printed by the watcher and again by the server it restarts.
        logging.getLogger("django.utils.autoreload").setLevel(logging.WARNING)
        super().run(**options)

    def on_bind(self, server_port: int) -> None:
        addr = str(getattr(self, "addr", "127.0.0.1"))  # set by runserver's handle(); the stubs do not know it
        host = f"[{addr}]" if getattr(self, "_raw_ipv6", False) else ("0.0.0.0" if addr == "0" else addr)
        self.stdout.write(f"benchhub is up (CONTROL-C stops it). Open {self.protocol}://{host}:{server_port}/")
