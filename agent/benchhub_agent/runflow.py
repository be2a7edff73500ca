"""`benchhub-agent run` after its options are parsed: the checks before anything is built (the server, the
model file, the campaign and its code, what the run will count as, the key, the power state), the pipeline,
the signature, the table and the publishing."""

from __future__ import annotations

import json
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click

from . import keys, machine, model, outbox, pipeline, preflight, report, result
from .dirs import home, write_atomic
from .errors import AgentError, ExitCode, printable
from .progress import Progress
from .publish import _asker, _counts_from, _ensure_registered, _markdown, _say, _send


@dataclass(frozen=True)
class RunFlags:
    """What `run` was told beyond what it measures: where and whether to publish, and how to talk."""

    server: str | None
    handle: str | None
    yes: bool
    trust_campaign: str | None
    no_upload: bool
    as_json: bool
    out: Path | None


def execute(options: pipeline.RunOptions, flags: RunFlags) -> None:
    """Everything `run` does, in order; each failure is an AgentError with its exit code."""
    server, handle, yes, as_json = flags.server, flags.handle, flags.yes, flags.as_json
    no_upload = flags.no_upload
    if not server and not no_upload:
        raise AgentError(
            ExitCode.USAGE,
            "No server to publish to: pass --server URL, set BENCHHUB_SERVER, "
            "or keep the result local with --no-upload.",
        )
    preflight.refuse_rosetta()
    model.read_gguf(options.model_path)  # a file that is no model stops here, before anything is registered or built
    upload = bool(server) and not no_upload
    interactive = sys.stdin.isatty() and not as_json
    dirs = home()
    signer = keys.load_or_create(dirs)
    progress = Progress()
    plan = preflight.load_campaign(options.campaign_slug, server, upload, dirs, progress)
    ask = _asker(interactive)
    preflight.confirm_code(plan, flags.trust_campaign, bool(options.prebuilt), interactive, _say, ask)
    counts, counted_as = preflight.what_it_counts_as(
        plan, pipeline.detect_backend(options.backend), bool(options.llama_src or options.prebuilt)
    )
    _say(textwrap.fill(counted_as, report.WIDTH))  # a paragraph, wrapped by words like the table below it
    if interactive and not yes and not ask("Build and measure?" if counts else "Build and measure anyway?"):
        raise AgentError(ExitCode.DECLINED, "Not started: nothing was built or measured.")
    if upload and server:
        _ensure_registered(server, handle, interactive)
    preflight.confirm_power(machine.run_state(), yes, interactive, _say, ask)
    done = pipeline.run(options, plan, dirs, progress)
    signer = keys.for_machine(dirs, done.payload["machine"], _say)  # a key is one machine
    body = result.signed_bytes(done.payload, signer)
    write_atomic(done.envelope_path, body)
    if flags.out:
        write_atomic(flags.out, body)
    summary: dict[str, Any] = {
        "result": str(done.envelope_path),
        "logs": str(done.result_dir / "logs"),
        "cells": report.cells(done.payload),
        "flags": done.payload["flags"],
        "uploaded": False,
        "url": None,
    }
    click.echo(report.table(done.payload), err=as_json)
    click.echo(f"\nSigned result: {done.envelope_path}\nLogs: {done.result_dir / 'logs'}", err=True)
    publish = server and not no_upload and (yes or (interactive and click.confirm(f"Publish to {server}?", True)))
    if publish and server:
        # Queued before the first attempt: an outage or a crash now loses nothing, `upload` resends it.
        queued = outbox.put(dirs, done.payload["nonce"], body)
        answer = _send(queued, server, handle, interactive)
        summary.update(uploaded=True, url=answer.get("url"), id=answer.get("id"), status=answer.get("status"))
        click.echo(printable(f"Published ({answer.get('status')}): {answer.get('url')}"), err=True)
        counts_from = _counts_from(answer)
        if counts_from:
            click.echo(
                f"This key is new: the result shows on its page now and enters the leaderboard from {counts_from}.",
                err=True,
            )
    else:
        click.echo(f"Kept locally; publish it later with `benchhub-agent upload {done.envelope_path}`.", err=True)
    click.echo("\nFor a pull request (GitHub Markdown):\n\n" + _markdown(done.payload, summary["url"]), err=as_json)
    if as_json:
        click.echo(json.dumps(summary, indent=1))
