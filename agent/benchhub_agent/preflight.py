"""What `run` checks before it reads the model or builds anything, so that a run that cannot succeed, or
should not start, stops in its first seconds: the Python's architecture, the server, the campaign (its
manifest checked and its code trusted) and the machine's power state. Registration, which needs the
CLI's prompts, is checked by the CLI right after these."""

from __future__ import annotations

import json
from collections.abc import Callable
from importlib.resources import files
from typing import Any

from . import campaign, machine, trust
from .dirs import Dirs
from .errors import AgentError, ExitCode, printable
from .progress import Progress

Echo = Callable[[str], None]
Ask = Callable[[str], bool]


def refuse_rosetta(run: machine.Runner = machine.run_quietly, system: str | None = None) -> None:
    if machine.translated(run, system):
        raise AgentError(
            ExitCode.PLATFORM,
            "This Python runs under Rosetta, so it would build and measure x86 code: install an arm64 Python "
            "(python.org's universal2 installer, or `brew install python` under /opt/homebrew) and reinstall "
            "benchhub-agent with it.",
        )


def load_campaign(slug: str, server: str | None, upload: bool, dirs: Dirs, progress: Progress) -> campaign.Campaign:
    """The campaign, with its manifest and signature checked; when the run will upload, the server must
    answer for it. A contributor whose agent bundles an older version is told what the open one changed."""
    progress.start("Loading the campaign")
    plan, fallback = campaign.load(slug, server, dirs, required=upload)
    where = f"bundled copy ({fallback})" if fallback else "manifest from the server, signed by the campaign key"
    progress.note(f"  {plan.slug} version {plan.version}: {where}")
    newer = campaign.newer_version_note(plan)
    if newer:
        progress.note(f"  {printable(newer)}")
    campaign.require_pinned(plan)
    return plan


def confirm_code(
    plan: campaign.Campaign, trusted: str | None, prebuilt: bool, interactive: bool, echo: Echo, ask: Ask
) -> None:
    """What the server's campaign runs here needs an explicit yes unless it is the bundled copy; with the
    user's own binaries (`prebuilt`) that is still each variant's environment and the sweep."""
    trust.confirm(plan, trusted, prebuilt, interactive, echo, ask)


def power_problems(state: dict[str, Any]) -> list[str]:
    problems = []
    if state["power_source"] == "battery":
        problems.append("runs on battery (macOS slows the GPU; the result would be flagged on_battery)")
    if state["low_power_mode"]:
        problems.append("is in Low Power Mode (the result would be flagged low_power_mode)")
    return problems


def confirm_power(state: dict[str, Any], yes: bool, interactive: bool, echo: Echo, ask: Ask) -> None:
    """Say so before starting when the machine would measure slow, and ask; `--yes` answers."""
    problems = power_problems(state)
    if not problems:
        return
    echo("This machine " + " and ".join(problems) + ".")
    if yes:
        return
    if not interactive:
        raise AgentError(
            ExitCode.DECLINED, "Not started on battery or in Low Power Mode: plug in, or pass --yes to run anyway."
        )
    if not ask("Run anyway?"):
        raise AgentError(ExitCode.DECLINED, "Not started: plug in or turn Low Power Mode off, then run again.")


def patched_backends(plan: campaign.Campaign) -> tuple[str, ...]:
    """The backends the campaign's patches change (its manifest's `patched_backends`; the service's default,
    Metal, where it states none): rows of any other backend are controls on the site."""
    stated = getattr(plan, "patched_backends", None)
    if stated:
        return tuple(stated)
    bundled = files("benchhub_protocol") / "campaigns" / f"{plan.slug}.json"
    try:
        manifest = json.loads(bundled.read_text())
    except (OSError, ValueError):
        return ("metal",)
    return tuple(manifest.get("patched_backends") or ("metal",))


def what_it_counts_as(plan: campaign.Campaign, backend: str, local_source: bool) -> tuple[bool, str]:
    """Before anything is built: whether this run can count on this campaign, and what the site will make
    of it (docs/protocol.md 5.1): (counts, one paragraph). A row counts only with correctness `pass`, which
    needs a device backend; a backend the patches do not touch is a control, shown apart."""
    touched = patched_backends(plan)
    if backend not in DEVICE_BACKENDS:
        verdict = (
            f"an excluded row: on {backend} test-backend-ops has no device backend to check, so correctness is "
            "`not_run`, and the site counts no row without a correctness pass (its reason: correctness not run)"
        )
        counts = False
    elif backend in touched:
        verdict = "a counted row, once correctness passes and the key is past probation"
        counts = True
    else:
        verdict = (
            f"a control shown apart: the patches change {', '.join(touched)} only, so on {backend} the variants "
            "are the same code and the row measures the noise, not the patches"
        )
        counts = True
    text = f"On {plan.slug} this {backend} run will be {verdict}."
    if local_source:
        text += " It is built from your own source or binaries, so the site flags it local_source."
    return counts, text


DEVICE_BACKENDS = ("metal", "cuda", "vulkan")
