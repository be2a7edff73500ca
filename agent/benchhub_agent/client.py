"""The only module that speaks HTTP. Tests that need a server run a live one, or patch this seam.

Whatever a server sends is read with a byte cap, never whole into memory first: a hostile server must
not be able to exhaust the memory of a contributor's machine with one answer.
"""

from __future__ import annotations

import ipaddress
import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import requests

from . import __version__
from .errors import AgentError, ExitCode

USER_AGENT = f"benchhub-agent/{__version__}"
# A closed port or a wrong host name fails within the connect timeout, before anything is built.
TIMEOUT_S = (5, 30)
RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})
JSON_CAP_BYTES = 1024 * 1024  # a campaign manifest is a few kB
PATCH_CAP_BYTES = 4 * 1024 * 1024  # the bundled patches are 7 and 24 kB
_CHUNK = 64 * 1024


def is_loopback(host: str | None) -> bool:
    if not host:
        return False
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def url_problem(url: str) -> str | None:
    """Why the agent will not talk to this URL (None when it will): https, or plain http to this machine
    only, since anyone on the path of a plain-http connection could hand the agent a manifest or patch."""
    if not url.isprintable() or any(char.isspace() for char in url):
        return "holds spaces or control characters"
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError for a port that is not a number
    except ValueError:
        return "is not a URL"
    if parts.username is not None or parts.password is not None:
        return "carries a user name or password"
    if parts.scheme == "https" and parts.hostname:
        return None
    if parts.scheme == "http" and is_loopback(parts.hostname):
        return None
    if parts.scheme == "http" and parts.hostname:
        return "is plain http to another machine (use https; plain http is only for 127.0.0.1, ::1 or localhost)"
    return "is not an http(s) URL"


def check_server(server: str) -> str:
    problem = url_problem(server)
    if problem:
        raise AgentError(ExitCode.USAGE, f"The server URL {server[:200]!r} {problem}.")
    return server


@dataclass(frozen=True)
class Response:
    status: int
    body: dict[str, Any]


def _url(server: str, path: str) -> str:
    return server.rstrip("/") + path


class TooLarge(Exception):
    """An answer longer than its cap: the rest is never read."""


def _capped(response: requests.Response, max_bytes: int) -> bytes:
    """The body, read in chunks and abandoned (the connection closed) as soon as it passes max_bytes."""
    declared = response.headers.get("Content-Length", "")
    if declared.isdigit() and int(declared) > max_bytes:
        raise TooLarge
    received = bytearray()
    for chunk in response.iter_content(_CHUNK):
        received += chunk
        if len(received) > max_bytes:
            raise TooLarge
    return bytes(received)


def _capped_json(response: requests.Response, max_bytes: int) -> dict[str, Any]:
    try:
        body = json.loads(_capped(response, max_bytes))
    except ValueError:
        return {"error": "not_json", "detail": f"HTTP {response.status_code}, not JSON"}
    return body if isinstance(body, dict) else {"value": body}


def get_json(server: str, path: str, max_bytes: int = JSON_CAP_BYTES) -> Response:
    check_server(server)
    try:
        with requests.get(
            _url(server, path), timeout=TIMEOUT_S, headers={"User-Agent": USER_AGENT}, stream=True
        ) as response:
            return Response(response.status_code, _capped_json(response, max_bytes))
    except requests.RequestException as error:
        raise AgentError(ExitCode.UPLOAD, f"Could not reach {server}: {error.__class__.__name__}.") from error
    except TooLarge as error:
        raise AgentError(
            ExitCode.MANIFEST, f"{server}{path} answered more than {max_bytes} bytes of JSON: refused."
        ) from error


def download(url: str, max_bytes: int = PATCH_CAP_BYTES) -> bytes:
    problem = url_problem(url)
    if problem:
        raise AgentError(ExitCode.MANIFEST, f"The download URL {url[:200]!r} {problem}: refused.")
    try:
        with requests.get(url, timeout=TIMEOUT_S, headers={"User-Agent": USER_AGENT}, stream=True) as response:
            if response.status_code != 200:
                raise AgentError(ExitCode.CAMPAIGN, f"Could not download {url}: HTTP {response.status_code}.")
            return _capped(response, max_bytes)
    except requests.RequestException as error:
        raise AgentError(ExitCode.CAMPAIGN, f"Could not download {url}: {error.__class__.__name__}.") from error
    except TooLarge as error:
        raise AgentError(
            ExitCode.MANIFEST, f"{url} is larger than the {max_bytes // 1024 // 1024} MB a patch may be: refused."
        ) from error


def post_envelope(
    server: str,
    path: str,
    body: bytes,
    attempts: int = 5,
    first_delay_s: float = 1.0,
    sleep: Callable[[float], None] = time.sleep,
) -> Response:
    """POST signed bytes, retrying what may succeed later (no connection, 429, 5xx) with exponential
    backoff. Retrying is safe: the server answers an identical envelope with the same result."""
    check_server(server)
    delay = first_delay_s
    last_problem = ""
    for attempt in range(1, attempts + 1):
        try:
            with requests.post(
                _url(server, path),
                data=body,
                timeout=TIMEOUT_S,
                headers={"Content-Type": "application/json", "User-Agent": USER_AGENT},
                stream=True,
            ) as response:
                if response.status_code not in RETRY_STATUSES:
                    return Response(response.status_code, _capped_json(response, JSON_CAP_BYTES))
                last_problem = f"HTTP {response.status_code}"
                retry_after = response.headers.get("Retry-After", "")
                if retry_after.isdigit():
                    delay = max(delay, min(float(retry_after), 300.0))
        except requests.RequestException as error:
            last_problem = f"could not reach {server} ({error.__class__.__name__})"
        except TooLarge as error:
            raise AgentError(ExitCode.UPLOAD, f"{server}{path} answered more than {JSON_CAP_BYTES} bytes.") from error
        if attempt < attempts:
            sleep(delay)
            delay *= 2
    raise AgentError(ExitCode.UPLOAD, f"Upload failed after {attempts} attempts: {last_problem}.")
