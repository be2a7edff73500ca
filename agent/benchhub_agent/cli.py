"""The command line: a thin Click layer over the modules. Every failure is one sentence and an exit code."""

from __future__ import annotations

import base64
import binascii
import os
import sys
import traceback
from collections.abc import Callable
from functools import wraps
from pathlib import Path
from typing import Any, TypeVar

import click
from benchhub_protocol.envelope import (
    EnvelopeError,
    open_envelope,
    parse_canonical_payload,
    strict_loads,
    verify_signature,
)
from benchhub_protocol.schema import SchemaViolation, validate_submission

from . import (
    __version__,
    client,
    doctor,
    keys,
    outbox,
    pipeline,
    runflow,
    withdrawal,
)
from .dirs import home
from .errors import AgentError, ExitCode, exit_codes_help, printable
from .publish import _counts_from, _markdown, _send  # noqa: F401 - tests read _counts_from and _markdown here

F = TypeVar("F", bound=Callable[..., Any])
EPILOG = "\b\nExit codes:\n" + exit_codes_help()
SEE_EXIT_CODES = "Exit codes: see `benchhub-agent --help`."
RUN_EPILOG = EPILOG


def handled(command: F) -> F:
    """One sentence on stderr and the documented exit code for every failure, never a traceback."""

    @wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return command(*args, **kwargs)
        except AgentError as error:
            click.echo(f"benchhub-agent: {printable(error.message)}", err=True)
            sys.exit(int(error.code))
        except (KeyboardInterrupt, click.exceptions.Abort):
            click.echo("\nbenchhub-agent: interrupted; nothing half-written was kept.", err=True)
            sys.exit(int(ExitCode.INTERRUPTED))
        except OSError as error:
            click.echo(f"benchhub-agent: {error.strerror or error} ({error.filename or 'no file'}).", err=True)
            sys.exit(int(ExitCode.FAILURE))
        except Exception as error:  # a bug: one sentence here, the traceback in a file for the report
            crash_log = home().data / "crash.log"
            crash_log.parent.mkdir(parents=True, exist_ok=True)
            with crash_log.open("a") as handle:
                traceback.print_exc(file=handle)
            click.echo(
                f"benchhub-agent: unexpected {type(error).__name__}: {error} (details in {crash_log}).", err=True
            )
            sys.exit(int(ExitCode.FAILURE))

    return wrapper  # type: ignore[return-value]


@click.group(epilog=EPILOG, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="benchhub-agent")
def main() -> None:
    """Benchmark llama.cpp patches on this machine, sign the result and publish it to benchhub."""


def _server(value: str | None) -> str | None:
    server = (value or os.environ.get("BENCHHUB_SERVER") or "").rstrip("/") or None
    return client.check_server(server) if server else None


def _batch_sizes(_ctx: click.Context, _param: click.Parameter, value: str | None) -> tuple[int, ...] | None:
    if value is None:
        return None
    try:
        sizes = tuple(int(part) for part in value.split(",") if part.strip())
    except ValueError:
        raise click.BadParameter("a comma-separated list of integers, e.g. 1,2,4,8") from None
    if not sizes or min(sizes) < 1 or len(set(sizes)) != len(sizes):
        raise click.BadParameter("distinct positive integers, e.g. 1,2,4,8")
    return sizes


def _variants(_ctx: click.Context, _param: click.Parameter, values: tuple[str, ...]) -> dict[str, Path]:
    parsed: dict[str, Path] = {}
    for value in values:
        name, sep, folder = value.partition("=")
        if not sep or not name or not folder:
            raise click.BadParameter(f"{value!r} is not NAME=BIN_DIR")
        parsed[name] = Path(folder).expanduser()
    return parsed


@main.command(epilog=RUN_EPILOG)
@click.argument("model_path", metavar="MODEL.gguf", type=click.Path(path_type=Path))
@click.option("--server", help="benchhub server URL (default: $BENCHHUB_SERVER).")
@click.option("--campaign", "campaign_slug", default="mv-ext-iquants", show_default=True)
@click.option(
    "--llama-src", type=click.Path(path_type=Path), help="llama.cpp source directory or .tar.gz instead of git."
)
@click.option(
    "--variant",
    "variants",
    multiple=True,
    callback=_variants,
    metavar="NAME=BIN_DIR",
    help="Use already-built binaries for this variant (repeatable); only the named variants run.",
)
@click.option("--backend", type=click.Choice(["auto", "metal", "cuda", "cpu"]), default="auto", show_default=True)
@click.option("--batch-sizes", callback=_batch_sizes, help="e.g. 1,2,4,8 (default: the campaign's).")
@click.option(
    "--reps", type=click.IntRange(1, 50), help="Rounds at least (default: the campaign's; under 2 is not standard)."
)
@click.option(
    "--max-reps",
    type=click.IntRange(1, 100),
    help="Cap on rounds while a cell's verdict is not settled (default 30; whole cycles).",
)
@click.option(
    "--max-minutes",
    type=click.FloatRange(0.1, 600),
    help="Time budget of the sweep in minutes (default: the campaign's, else 15): no cycle starts past it.",
)
@click.option("--npp", type=click.IntRange(1, 100000), help="Prompt tokens per sequence (default: the campaign's).")
@click.option("--ntg", type=click.IntRange(1, 100000), help="Generated tokens per sequence (default: the campaign's).")
@click.option(
    "--gen-tokens",
    type=click.IntRange(8, 4096),
    default=96,
    show_default=True,
    help="Tokens per greedy completion in the generation check.",
)
@click.option("--cmake-arg", "cmake_args", multiple=True, help="Extra CMake flag (repeatable), part of the cache key.")
@click.option("--label", help="Free-text model label, e.g. 'Qwen3-1.7B UD-IQ2_XXS'.")
@click.option("--out", type=click.Path(path_type=Path), help="Also write the signed result to this file.")
@click.option("--handle", help="Public handle to register this machine's key under (asked once otherwise).")
@click.option("--yes", is_flag=True, help="Answer yes to publishing and to running on battery (not to untrusted code).")
@click.option(
    "--trust-campaign",
    metavar="SLUG@sha256:DIGEST",
    help="Run campaign SLUG although it is not the copy bundled with this agent, for the manifest of this "
    "digest only (the listing prints it; any change asks again).",
)
@click.option(
    "--no-upload", is_flag=True, help="Keep the result local; publish it later with `benchhub-agent upload PATH`."
)
@click.option("--json", "as_json", is_flag=True, help="Print a machine-readable summary on stdout.")
@handled
def run(
    model_path: Path,
    server: str | None,
    campaign_slug: str,
    llama_src: Path | None,
    variants: dict[str, Path],
    backend: str,
    batch_sizes: tuple[int, ...] | None,
    reps: int | None,
    max_reps: int | None,
    max_minutes: float | None,
    npp: int | None,
    ntg: int | None,
    gen_tokens: int,
    cmake_args: tuple[str, ...],
    label: str | None,
    out: Path | None,
    handle: str | None,
    yes: bool,
    trust_campaign: str | None,
    no_upload: bool,
    as_json: bool,
) -> None:
    """Build, check, measure and sign; then publish the result (asks first unless --yes).

    Before anything is read or built: the server, the campaign (every manifest field checked; code that
    did not ship with this agent shown and confirmed), this key's registration and the power state.

    How long: the first build takes 5-10 minutes (later runs reuse it), the correctness check 1-2
    minutes, and the sweep adds whole cycles until every cell's verdict is settled, at most 60 rounds or
    15 minutes (an H100 with an 8B model: about 7 minutes; the progress line shows the expected range);
    a CPU-only build can take 40 minutes or more."""
    flags = runflow.RunFlags(
        server=_server(server),
        handle=handle,
        yes=yes,
        trust_campaign=trust_campaign,
        no_upload=no_upload,
        as_json=as_json,
        out=out,
    )
    options = pipeline.RunOptions(
        model_path=model_path,
        server=flags.server,
        campaign_slug=campaign_slug,
        llama_src=llama_src,
        prebuilt=variants,
        backend=backend,
        batch_sizes=batch_sizes,
        reps=reps,
        max_reps=max_reps,
        max_seconds=max_minutes * 60 if max_minutes else None,
        npp=npp,
        ntg=ntg,
        gen_tokens=gen_tokens,
        cmake_args=cmake_args,
        label=label,
    )
    runflow.execute(options, flags)


@main.command(epilog=SEE_EXIT_CODES)
@click.argument("files", nargs=-1, type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--server", help="benchhub server URL (default: $BENCHHUB_SERVER).")
@click.option("--handle", help="Public handle, if this key is not registered yet.")
@handled
def upload(files: tuple[Path, ...], server: str | None, handle: str | None) -> None:
    """Send what is waiting in the outbox, or the given signed result files."""
    server = _server(server)
    if not server:
        raise AgentError(ExitCode.USAGE, "No server: pass --server URL or set BENCHHUB_SERVER.")
    dirs = home()
    paths = list(files) or outbox.pending(dirs)
    if not paths:
        click.echo("The outbox is empty.")
        return
    failures = 0
    for path in paths:
        try:
            answer = _send(path, server, handle, sys.stdin.isatty())
        except AgentError as error:
            failures += 1
            click.echo(printable(f"{path.name}: {error.message}"), err=True)
            continue
        click.echo(printable(f"{path.name}: {answer.get('status')} {answer.get('url')}"))
    if failures:
        raise AgentError(ExitCode.UPLOAD, f"{failures} of {len(paths)} result(s) were not accepted; they stay queued.")


@main.command(epilog=SEE_EXIT_CODES)
@click.argument("submission_id", metavar="ID")
@click.option("--server", help="benchhub server URL (default: $BENCHHUB_SERVER).")
@handled
def withdraw(submission_id: str, server: str | None) -> None:
    """Withdraw a result you published (signed by this machine's key, which must have signed it)."""
    server = _server(server)
    if not server:
        raise AgentError(ExitCode.USAGE, "No server: pass --server URL or set BENCHHUB_SERVER.")
    if not keys.key_path(home()).exists():
        raise AgentError(ExitCode.USAGE, "This machine has no key yet, so it has published nothing to withdraw.")
    answer = withdrawal.withdraw(server, submission_id, keys.read_key(keys.key_path(home())))
    click.echo(printable(f"Withdrawn: {answer.get('id', submission_id)} ({answer.get('withdrawn_at', 'now')})."))


@main.command("doctor", epilog=SEE_EXIT_CODES)
@click.option("--backend", type=click.Choice(["auto", "metal", "cuda", "cpu"]), default="auto")
@click.option("--server", help="benchhub server URL to check (default: $BENCHHUB_SERVER).")
@handled
def doctor_command(backend: str, server: str | None) -> None:
    """What a run needs that this machine lacks, each with the fix; what it would report about this machine
    (an unknown reading is a warning); and whether the server answers."""
    try:
        checked, bad_url = _server(server), None
    except AgentError as error:  # a malformed URL is one row of the table, not the end of it
        checked, bad_url = None, doctor.Check("server", False, error.message, "pass the site's https:// address")
    found = doctor.checks(home().cache, pipeline.detect_backend(backend), checked)
    if bad_url:
        found = [check for check in found if check.name != "server"] + [bad_url]
    for check in found:
        hint = f"\n      fix: {check.fix}" if not check.ok else f"\n      note: {check.fix}" if check.warn else ""
        click.echo(f"[{check.mark}] {check.name}: {check.detail}{hint}")
    # The exit code is the table's: a missing tool is 7, a server that does not answer (all else fine) 8.
    if any(not check.ok for check in found if check.name != "server"):
        raise AgentError(ExitCode.MISSING_TOOL, "Some requirements are missing (see above).")
    if not all(check.ok for check in found):
        raise AgentError(ExitCode.UPLOAD, "The server cannot be reached or refused (see above); the rest is ready.")


@main.group(epilog=SEE_EXIT_CODES, invoke_without_command=True)
@click.pass_context
@handled
def key(ctx: click.Context) -> None:
    """Show this machine's key (created on first use); register it or link it to your handle."""
    if ctx.invoked_subcommand is None:
        signer = keys.load_or_create(home())
        click.echo(f"keyid: {signer.keyid}\npublic key: {signer.public_key_b64}\nfile: {keys.key_path(home())}")


@key.command("register", epilog=SEE_EXIT_CODES)
@click.argument("handle")
@click.option("--server", help="benchhub server URL (default: $BENCHHUB_SERVER).")
@handled
def key_register(handle: str, server: str | None) -> None:
    """Register this machine's key under HANDLE."""
    server = _server(server)
    if not server:
        raise AgentError(ExitCode.USAGE, "No server: pass --server URL or set BENCHHUB_SERVER.")
    dirs = home()
    click.echo(
        printable(f"Registered as {keys.register(dirs, server, handle, keys.load_or_create(dirs))} on {server}.")
    )


@key.command("link", epilog=SEE_EXIT_CODES)
@click.argument("handle")
@click.argument("existing_key", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--server", help="benchhub server URL (default: $BENCHHUB_SERVER).")
@handled
def key_link(handle: str, existing_key: Path, server: str | None) -> None:
    """Add this machine's key to HANDLE, co-signed by EXISTING_KEY (a key file already on that handle)."""
    server = _server(server)
    if not server:
        raise AgentError(ExitCode.USAGE, "No server: pass --server URL or set BENCHHUB_SERVER.")
    dirs = home()
    linked = keys.register(dirs, server, handle, keys.load_or_create(dirs), keys.read_key(existing_key))
    click.echo(printable(f"This key is now on {linked}."))


@main.command("verify", epilog=SEE_EXIT_CODES)
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--public-key", help="Base64 public key to check the signature with (default: this machine's key).")
@handled
def verify_file(file: Path, public_key: str | None) -> None:
    """Check a signed result: envelope, canonical payload, schema v1 and the Ed25519 signature."""
    try:
        opened = open_envelope(strict_loads(file.read_bytes()))
        payload = parse_canonical_payload(opened.payload)
        validate_submission(payload)
    except EnvelopeError as error:
        raise AgentError(ExitCode.VERIFY, f"{file} is not a valid envelope: {error.detail}") from error
    except SchemaViolation as error:
        raise AgentError(ExitCode.VERIFY, f"{file}: payload field {error.field}: {error.detail}") from error
    try:
        raw = base64.b64decode(public_key, validate=True) if public_key else keys.load_or_create(home()).public_key
    except binascii.Error as error:
        raise AgentError(ExitCode.USAGE, "--public-key is not base64.") from error
    keyid = opened.keyids[0]
    if not verify_signature(opened, keyid, raw):
        raise AgentError(ExitCode.VERIFY, f"The signature by {keyid[:16]}… does not verify with that public key.")
    click.echo(
        f"OK: signed by {keyid}; campaign {payload['campaign']}, model {payload['model']['file_name']}, "
        f"{len(payload['sweep']['runs'])} runs, flags: {', '.join(payload['flags']) or 'none'}."
    )


@main.command("dirs", epilog=SEE_EXIT_CODES)
@handled
def dirs_command() -> None:
    """Where the agent keeps its files (set BENCHHUB_HOME to move them all)."""
    for name, path in home().as_dict().items():
        click.echo(f"{name:9} {path}")
