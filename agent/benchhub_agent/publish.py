"""Publishing a signed result from the command line: the key's registration, the upload (once more if the
server forgot the key), and the texts printed after a run: the probation notice and the pull-request Markdown."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import click
from benchhub_protocol import markdown

from . import keys, outbox, report
from .dirs import home
from .errors import AgentError, ExitCode, printable


def _say(message: str) -> None:
    click.echo(printable(message), err=True)


def _asker(interactive: bool) -> Callable[[str], bool]:
    def ask(question: str) -> bool:
        return interactive and click.confirm(question, default=False, err=True)

    return ask


def _ensure_registered(server: str, handle: str | None, interactive: bool, force: bool = False) -> None:
    dirs = home()
    signer = keys.load_or_create(dirs)
    known = keys.registered_handle(dirs, server, signer.keyid)
    if known and not handle and not force:
        return
    moved = None if known else keys.handle_of_previous_key(dirs, server)
    if moved is not None:  # a new key for new hardware: linked to the handle by the key it replaced
        linked = keys.register(dirs, server, moved[0], signer, moved[1])
        click.echo(printable(f"Linked this machine's new key {signer.keyid[:16]}… to {linked} on {server}."), err=True)
        return
    handle = handle or known
    if not handle:
        if not interactive:
            raise AgentError(ExitCode.UPLOAD, "This key is not registered with the server yet: pass --handle NAME.")
        handle = click.prompt("Pick a public handle for your results (letters, digits, '-')")
    registered = keys.register(dirs, server, str(handle), signer)
    click.echo(printable(f"Registered key {signer.keyid[:16]}… as {registered} on {server}."), err=True)


def _send(path: Path, server: str, handle: str | None, interactive: bool) -> dict[str, Any]:
    """Upload one signed file, registering this key first when needed, and once more if the server has
    forgotten it (a reset server): the same envelope is then accepted as it would have been."""
    _ensure_registered(server, handle, interactive)
    try:
        return outbox.send(path, server, home())
    except outbox.UnknownKey:
        _ensure_registered(server, handle, interactive, force=True)
        return outbox.send(path, server, home())


def _counts_from(answer: dict[str, Any]) -> str | None:
    """The server's word on when a key on probation counts, shown only if it is a real time."""
    value = answer.get("counts_from")
    if not isinstance(value, str) or len(value) > 40:
        return None
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        return None
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")


def _markdown(payload: dict[str, Any], url: str | None) -> str:
    """The run's table in the form the site's "Copy as Markdown" gives, for a pull request."""
    machine, model = payload["machine"], payload["model"]
    title = (
        f"{machine['chip']}, {model.get('label') or model['file_name']} ({model['file_type']}), {payload['campaign']}"
    )
    lines = markdown.lines_of_run(report.cells(payload), payload["variants"][0]["name"])
    return printable(markdown.table(lines, title=title, permalink=url or "not published yet"))
