"""Patches are code that will be compiled and run on this machine: code that did not ship with this
agent is shown, and built only after an explicit yes.

A server's campaign is "bundled" when a campaign of the same slug ships with this agent version and
every variant the server lists builds the same code: the same repository, commit or ref, and patches
of the same sha256. Anything else (a patch changed by one byte, a new ref, another repository, a
campaign this agent has never seen) is described before anything is fetched or built. `--yes` does
not answer this question: it is meant for questions about publishing, and a script that passes it
must not thereby run whatever a server sends. `--trust-campaign SLUG` answers it for one campaign.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from pathlib import Path

from . import __version__, campaign
from .errors import AgentError, ExitCode

_DIFF_PATH = re.compile(r"^(?:\+\+\+|---) (?:[ab]/)?(\S+)|^diff --git a/(\S+) b/(\S+)", re.M)


def files_touched(patch_text: str) -> list[str]:
    found: set[str] = set()
    for match in _DIFF_PATH.finditer(patch_text):
        found.update(path for path in match.groups() if path and path != "/dev/null")
    return sorted(found)


def _code(variants: Iterable[campaign.Variant]) -> set[tuple[str, str, str, tuple[str, ...]]]:
    return {(v.name, v.commit, v.ref or "", tuple(patch.sha256 for patch in v.patches)) for v in variants}


def is_bundled(plan: campaign.Campaign) -> bool:
    if plan.source == "bundled":
        return True
    try:
        shipped = campaign.bundled(plan.slug)
    except AgentError:
        return False
    return plan.repo == shipped.repo and _code(plan.variants) <= _code(shipped.variants)


def describe(plan: campaign.Campaign) -> str:
    """What would be built: the repository, each variant's commit or ref, each patch's name, size,
    sha256 and the files it touches."""
    lines = [f"Campaign {plan.slug} is not the one bundled with benchhub-agent {__version__}; it builds this code:"]
    lines.append(f"  repository: {plan.repo}")
    for variant in plan.variants:
        at = variant.commit or f"{variant.ref} (whatever commit it points to now)"
        lines.append(f"  variant {variant.name}: llama.cpp at {at}")
        for patch in variant.patches:
            data = Path(patch.path).read_bytes()
            touched = files_touched(data.decode(errors="replace"))
            lines.append(f"    patch {patch.name}: {len(data)} bytes, sha256 {patch.sha256}")
            lines.append(f"      touches: {', '.join(touched) or 'no file a diff header names'}")
    return "\n".join(lines)


def confirm(
    plan: campaign.Campaign,
    trusted_slug: str | None,
    interactive: bool,
    echo: Callable[[str], None],
    ask: Callable[[str], bool],
) -> None:
    """Return when the campaign's code may be built; raise AgentError(UNTRUSTED) otherwise."""
    if is_bundled(plan):
        return
    echo(describe(plan))
    if trusted_slug == plan.slug:
        echo(f"Trusted with --trust-campaign {plan.slug}.")
        return
    if not interactive:
        raise AgentError(
            ExitCode.UNTRUSTED,
            f"Campaign {plan.slug} builds code not bundled with this agent (listed above): "
            f"read it, then pass --trust-campaign {plan.slug} to build it.",
        )
    if not ask("Build and run this code on this machine?"):
        raise AgentError(ExitCode.UNTRUSTED, f"Not built: campaign {plan.slug}'s code was not trusted.")
