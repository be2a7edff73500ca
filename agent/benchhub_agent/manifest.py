"""Every field of a server's campaign manifest, checked before any of it is used.

The server is not trusted (it may be hostile, or hijacked): its strings reach git's command line, file
names under the agent's home and the environment of the tools it runs, and its numbers size the work.
So each field must fit a narrow pattern or bound, and a refusal names the field in one sentence. The
bounds are wide enough for any campaign the service has run, and narrow enough that a manifest cannot
keep a machine busy for days or fill its disk.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

from benchhub_protocol.schema import SWEEP_EXTRA_ARGS

from .client import url_problem
from .errors import AgentError, ExitCode

SLUG = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}")
# A plain file name: no '/', no leading '.' or '-' (so never '..', a hidden file or a command-line option).
NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._+-]{0,99}")
COMMIT = re.compile(r"[0-9a-f]{40}")
SHA256 = re.compile(r"[0-9a-f]{64}")
# refs/ and components that each start with a letter, digit or '_': no '..', no '-x', no '//'.
REF = re.compile(r"refs(?:/[A-Za-z0-9_][A-Za-z0-9._-]{0,99}){2,8}")
# The only variables a manifest may set: ggml's performance switches that the campaigns need (patch 02's
# opt-in per i-quant, read once per process by ggml-metal-device.cpp). A closed list, not a pattern:
# llama.cpp reads every LLAMA_ARG_* as a command-line option (LLAMA_ARG_LOG_FILE writes a file), and
# the loader's variables (LD_PRELOAD, DYLD_*) load code. A new switch needs a new agent release.
ENV_ALLOWED = frozenset(
    {
        "GGML_METAL_MV_IQ2_XXS_VEC",
        "GGML_METAL_MV_IQ2_XS_VEC",
        "GGML_METAL_MV_IQ2_S_VEC",
        "GGML_METAL_MV_IQ3_XXS_VEC",
    }
)
# A switch's value: a short word or number, never a path, a library or a URL (no '/', ':', '~' or '=').
ENV_VALUE = re.compile(r"[A-Za-z0-9_.,+-]{0,32}")
MAX_VARIANTS = 16
MAX_PATCHES = 16

# (lowest, highest) of each numeric sweep setting; a key absent here is not passed on.
SWEEP_BOUNDS: dict[str, tuple[int, int]] = {
    "reps": (1, 20),
    "npp": (1, 8192),
    "ntg": (1, 4096),
    "n_ctx": (1, 262_144),
    "n_gpu_layers": (-1, 999),
}
MAX_BATCH_SIZES = 32
MAX_BATCH_SIZE = 512


def _refuse(slug: str, where: str, why: str) -> AgentError:
    return AgentError(ExitCode.MANIFEST, f"The server's manifest for campaign {slug} was refused: {where} {why}.")


def _shown(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:79] + "…"


def _string(value: object, pattern: re.Pattern[str], slug: str, where: str, what: str) -> str:
    if not isinstance(value, str) or not pattern.fullmatch(value):
        raise _refuse(slug, where, f"{_shown(value)} is not {what}")
    return value


def _integer(value: object, bounds: tuple[int, int], slug: str, where: str) -> int:
    low, high = bounds
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise _refuse(slug, where, f"{_shown(value)} is not an integer from {low} to {high}")
    return value


def _repo(value: object, slug: str, local_server: bool) -> str:
    """https, or a file:// repository when the server is this machine's own (a developer's test server,
    which can already run what it likes here): never a path or option git would read another way."""
    local = local_server and isinstance(value, str) and value.startswith("file:///")
    if not isinstance(value, str) or not (value.startswith("https://") or local) or len(value) > 300:
        raise _refuse(slug, "repo", f"{_shown(value)} is not an https:// URL")
    parts = urlsplit(value)
    problem = None if local else url_problem(value)
    if problem or parts.query or parts.fragment or not value.isprintable() or " " in value:
        raise _refuse(slug, "repo", f"{_shown(value)} is not a plain https:// URL of a repository")
    return value


def _env(value: object, slug: str, where: str) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, Mapping) or len(value) > 32:
        raise _refuse(slug, where, "is not a map of at most 32 variables")
    for key, setting in value.items():
        if key not in ENV_ALLOWED:
            raise _refuse(slug, f"{where} key", f"{_shown(key)} is not one of the ggml switches this agent passes on")
        _string(setting, ENV_VALUE, slug, f"{where}.{key}", "a short plain value (letters, digits, '.', ',', '+', '-')")
    return dict(value)


def _patches(value: object, slug: str, where: str) -> None:
    if not isinstance(value, list) or len(value) > MAX_PATCHES:
        raise _refuse(slug, where, f"is not a list of at most {MAX_PATCHES} patches")
    for index, patch in enumerate(value):
        here = f"{where}[{index}]"
        if not isinstance(patch, Mapping):
            raise _refuse(slug, here, "is not an object")
        _string(patch.get("name"), NAME, slug, f"{here}.name", "a plain file name")
        _string(patch.get("sha256"), SHA256, slug, f"{here}.sha256", "64 lowercase hex characters")
        url = patch.get("url")
        problem = url_problem(url) if isinstance(url, str) else "is not a string"
        if problem:
            raise _refuse(slug, f"{here}.url", f"{_shown(url)} {problem}")


def _variant(entry: object, slug: str, where: str) -> str:
    if not isinstance(entry, Mapping):
        raise _refuse(slug, where, "is not an object")
    name = _string(entry.get("name"), NAME, slug, f"{where}.name", "a plain name")
    available = entry.get("available", True)
    if not isinstance(available, bool):
        raise _refuse(slug, f"{where}.available", "is not true or false")
    if not available:
        return name  # never used: the server lists it without its patches (not published yet)
    commit, ref = entry.get("commit"), entry.get("ref")
    if commit in (None, ""):
        raise _refuse(slug, f"{where}.commit", "is missing: this agent builds pinned commits only, never a ref")
    _string(commit, COMMIT, slug, f"{where}.commit", "40 lowercase hex characters")
    if ref is not None and (
        not isinstance(ref, str) or not REF.fullmatch(ref) or ".." in ref or ref.endswith((".lock", "."))
    ):
        raise _refuse(slug, f"{where}.ref", f"{_shown(ref)} is not a plain refs/... name")
    _patches(entry.get("patches"), slug, f"{where}.patches")
    _env(entry.get("env"), slug, f"{where}.env")
    return name


def _sweep(value: object, slug: str) -> None:
    if not isinstance(value, Mapping):
        raise _refuse(slug, "sweep", "is not an object")
    for key, bounds in SWEEP_BOUNDS.items():
        if value.get(key) is not None or key in ("npp", "ntg"):
            _integer(value.get(key), bounds, slug, f"sweep.{key}")
    sizes = value.get("batch_sizes")
    if not isinstance(sizes, list) or not 1 <= len(sizes) <= MAX_BATCH_SIZES:
        raise _refuse(slug, "sweep.batch_sizes", f"is not a list of 1 to {MAX_BATCH_SIZES} batch sizes")
    for index, size in enumerate(sizes):
        _integer(size, (1, MAX_BATCH_SIZE), slug, f"sweep.batch_sizes[{index}]")
    if len(set(sizes)) != len(sizes):
        raise _refuse(slug, "sweep.batch_sizes", "repeats a batch size")
    if not isinstance(value.get("flash_attn", True), bool):
        raise _refuse(slug, "sweep.flash_attn", "is not true or false")
    extra = value.get("extra_args") or []
    if not isinstance(extra, list) or any(arg not in SWEEP_EXTRA_ARGS for arg in extra):
        allowed = ", ".join(SWEEP_EXTRA_ARGS)
        raise _refuse(slug, "sweep.extra_args", f"{_shown(extra)} holds an argument other than {allowed}")


def validate(manifest: object, slug: str, local_server: bool = False) -> None:
    """Raise AgentError(MANIFEST) for the first field that breaks a rule; the manifest asked for is `slug`,
    from a server on this machine when `local_server`."""
    if not isinstance(manifest, Mapping):
        raise _refuse(slug, "the manifest", "is not a JSON object")
    if manifest.get("slug") != slug:
        raise _refuse(slug, "slug", f"{_shown(manifest.get('slug'))} is not the campaign asked for")
    _string(slug, SLUG, slug, "slug", "a plain slug")
    _integer(manifest.get("version"), (1, 999_999), slug, "version")
    _repo(manifest.get("repo"), slug, local_server)
    variants = manifest.get("variants")
    if not isinstance(variants, list) or not 1 <= len(variants) <= MAX_VARIANTS:
        raise _refuse(slug, "variants", f"is not a list of 1 to {MAX_VARIANTS} variants")
    names = [_variant(entry, slug, f"variants[{index}]") for index, entry in enumerate(variants)]
    if len(set(names)) != len(names):
        raise _refuse(slug, "variants", "repeats a variant name")
    if manifest.get("baseline") not in names:
        raise _refuse(slug, "baseline", f"{_shown(manifest.get('baseline'))} is not one of its variants")
    _sweep(manifest.get("sweep"), slug)


def sweep_settings(sweep: Mapping[str, Any]) -> dict[str, Any]:
    """Only the sweep settings this agent knows and has checked: an unknown key cannot reach a tool."""
    known = (*SWEEP_BOUNDS, "batch_sizes", "flash_attn", "extra_args")
    return {key: sweep[key] for key in known if key in sweep}
