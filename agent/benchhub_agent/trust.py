"""What a server's campaign makes this machine do, shown and consented before any of it is used.

By the time this runs the manifest's signature has verified under a campaign key this agent trusts
(campaign.py, exit 16 otherwise): a server cannot change a signed field. A signed version that is not
the bundled one (a newer version the moderator published) is still listed and asked about below, so
that a stolen campaign key alone cannot make a machine build new code without its owner's yes.

A server's campaign is "bundled" when a campaign of the same slug ships with this agent version and the
whole manifest is the same: repository, baseline, every variant's name, commit, ref, patches (by
sha256) and environment, and the sweep; a bundled variant it leaves out (unpublished) runs nothing and
is no difference. Anything else (a patch changed by one byte, one more
environment variable, another batch size, a campaign this agent has never seen) is listed, with every
variable the variants set, and then asked about. `--yes` never answers this question: it is meant for
questions about publishing, and a script that passes it must not thereby run whatever a server sends.

Only `--trust-campaign SLUG@sha256:DIGEST` answers it without a prompt, and only for the manifest whose
digest that is (the listing prints it): a server that changes anything afterwards is asked about again.
A plain `--trust-campaign SLUG` trusts nothing beyond the bundled copy.

`--variant NAME=BIN_DIR` runs build nothing, but still take each variant's environment and the sweep from
the server: those are compared and asked about the same way.
"""

from __future__ import annotations

import dataclasses
import hashlib
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import rfc8785

from . import __version__, campaign
from .errors import AgentError, ExitCode
from .manifest import SLUG, sweep_settings

_DIFF_PATH = re.compile(r"^(?:\+\+\+|---) (?:[ab]/)?(\S+)|^diff --git a/(\S+) b/(\S+)", re.M)
_TRUSTED = re.compile(rf"(?P<slug>{SLUG.pattern})(?:@sha256:(?P<digest>[0-9a-f]{{64}}))?")


def files_touched(patch_text: str) -> list[str]:
    found: set[str] = set()
    for match in _DIFF_PATH.finditer(patch_text):
        found.update(path for path in match.groups() if path and path != "/dev/null")
    return sorted(found)


def identity(plan: campaign.Campaign, prebuilt: bool = False) -> dict[str, Any]:
    """Everything of a campaign that decides what runs here. `prebuilt`: only what a run with the user's
    own binaries takes from it (each variant's environment and the sweep)."""
    variants: list[dict[str, Any]] = [
        {"name": v.name, "env": dict(v.env)}
        if prebuilt
        else {
            "name": v.name,
            "commit": v.commit,
            "ref": v.ref or "",
            "patches": [{"name": patch.name, "sha256": patch.sha256} for patch in v.patches],
            "env": dict(v.env),
        }
        for v in plan.variants
    ]
    found: dict[str, Any] = {"slug": plan.slug, "variants": variants, "sweep": sweep_settings(plan.sweep)}
    if not prebuilt:
        found.update(repo=plan.repo, baseline=plan.baseline)
    return found


def digest(plan: campaign.Campaign) -> str:
    """The manifest's digest: sha256 of its whole identity as canonical JSON (RFC 8785)."""
    return hashlib.sha256(rfc8785.dumps(identity(plan))).hexdigest()


def is_bundled(plan: campaign.Campaign, prebuilt: bool = False) -> bool:
    if plan.source == "bundled":
        return True
    try:
        shipped = campaign.bundled(plan.slug)
    except AgentError:
        return False
    # A bundled variant the server leaves out (its patch not published yet) runs nothing: no difference.
    names = {variant.name for variant in plan.variants}
    kept = [variant for variant in shipped.variants if variant.name in names]
    return identity(plan, prebuilt) == identity(dataclasses.replace(shipped, variants=tuple(kept)), prebuilt)


def _env_lines(env: dict[str, str]) -> list[str]:
    return [f"    env {key}={value}" for key, value in sorted(env.items())]


def describe(plan: campaign.Campaign, prebuilt: bool = False) -> str:
    """What would run: the repository, each variant's commit or ref, each patch's name, size, sha256 and
    the files it touches, every environment variable, the sweep, and the manifest's digest."""
    lines = [f"Campaign {plan.slug} is not the one bundled with benchhub-agent {__version__}; it runs this:"]
    if prebuilt:
        lines.append("  your own binaries (--variant), with the server's environment and sweep:")
    else:
        lines.append(f"  repository: {plan.repo}")
    for variant in plan.variants:
        if prebuilt:
            lines.append(f"  variant {variant.name}")
            lines += _env_lines(variant.env)
            continue
        pinned_from = f" (pinned from {variant.ref})" if variant.ref else ""
        lines.append(f"  variant {variant.name}: llama.cpp at {variant.commit}{pinned_from}")
        for patch in variant.patches:
            data = Path(patch.path).read_bytes()
            touched = files_touched(data.decode(errors="replace"))
            lines.append(f"    patch {patch.name}: {len(data)} bytes, sha256 {patch.sha256}")
            lines.append(f"      touches: {', '.join(touched) or 'no file a diff header names'}")
        lines += _env_lines(variant.env)
    sweep = sweep_settings(plan.sweep)
    lines.append("  sweep: " + ", ".join(f"{key}={sweep[key]}" for key in sorted(sweep)))
    lines.append(f"  manifest digest: {plan.slug}@sha256:{digest(plan)}")
    return "\n".join(lines)


def parse_trusted(value: str | None) -> tuple[str, str | None] | None:
    """`--trust-campaign` as (slug, digest or None); AgentError(USAGE) when it is neither form."""
    if value is None:
        return None
    match = _TRUSTED.fullmatch(value)
    if not match:
        raise AgentError(ExitCode.USAGE, f"--trust-campaign {value[:100]!r} is neither SLUG nor SLUG@sha256:DIGEST.")
    return match["slug"], match["digest"]


def confirm(
    plan: campaign.Campaign,
    trusted: str | None,
    prebuilt: bool,
    interactive: bool,
    echo: Callable[[str], None],
    ask: Callable[[str], bool],
) -> None:
    """Return when what the campaign runs may run; raise AgentError(UNTRUSTED) otherwise."""
    given = parse_trusted(trusted)
    if is_bundled(plan, prebuilt):
        return
    echo(describe(plan, prebuilt))
    wanted = f"{plan.slug}@sha256:{digest(plan)}"
    if given is not None and given[0] == plan.slug and given[1] is not None:
        if trusted == wanted:
            echo(f"Trusted with --trust-campaign {wanted}.")
            return
        raise AgentError(
            ExitCode.UNTRUSTED,
            f"Campaign {plan.slug}'s manifest has changed since its digest was given (it is now {wanted}, "
            "listed above): read it again before trusting it.",
        )
    if not interactive:
        raise AgentError(
            ExitCode.UNTRUSTED,
            f"Campaign {plan.slug} is not the bundled one (listed above): read it, "
            f"then pass --trust-campaign {wanted} to run it.",
        )
    if not ask("Build and run this on this machine?"):
        raise AgentError(ExitCode.UNTRUSTED, f"Not run: campaign {plan.slug} was not trusted.")
