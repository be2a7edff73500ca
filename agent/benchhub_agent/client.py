"""The only module that speaks HTTP. Tests that need a server run a live one, or patch this seam."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import requests

from . import __version__
from .errors import AgentError, ExitCode

USER_AGENT = f"benchhub-agent/{__version__}"
TIMEOUT_S = 30
RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})


@dataclass(frozen=True)
class Response:
    status: int
    body: dict[str, Any]


def _url(server: str, path: str) -> str:
    return server.rstrip("/") + path


def _json(response: requests.Response) -> dict[str, Any]:
    try:
        body = response.json()
    except ValueError:
        return {"error": "not_json", "detail": response.text[:300]}
    return body if isinstance(body, dict) else {"value": body}


def get_json(server: str, path: str) -> Response:
    try:
        response = requests.get(_url(server, path), timeout=TIMEOUT_S, headers={"User-Agent": USER_AGENT})
    except requests.RequestException as error:
        raise AgentError(ExitCode.UPLOAD, f"Could not reach {server}: {error.__class__.__name__}.") from error
    return Response(response.status_code, _json(response))


def download(url: str, max_bytes: int = 4 * 1024 * 1024) -> bytes:
    try:
        response = requests.get(url, timeout=TIMEOUT_S, headers={"User-Agent": USER_AGENT})
    except requests.RequestException as error:
        raise AgentError(ExitCode.CAMPAIGN, f"Could not download {url}: {error.__class__.__name__}.") from error
    if response.status_code != 200 or len(response.content) > max_bytes:
        raise AgentError(ExitCode.CAMPAIGN, f"Could not download {url}: HTTP {response.status_code}.")
    return response.content


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
    delay = first_delay_s
    last_problem = ""
    for attempt in range(1, attempts + 1):
        try:
            response = requests.post(
                _url(server, path),
                data=body,
                timeout=TIMEOUT_S,
                headers={"Content-Type": "application/json", "User-Agent": USER_AGENT},
            )
        except requests.RequestException as error:
            last_problem = f"could not reach {server} ({error.__class__.__name__})"
        else:
            if response.status_code not in RETRY_STATUSES:
                return Response(response.status_code, _json(response))
            last_problem = f"HTTP {response.status_code}"
            retry_after = response.headers.get("Retry-After", "")
            if retry_after.isdigit():
                delay = max(delay, min(float(retry_after), 300.0))
        if attempt < attempts:
            sleep(delay)
            delay *= 2
    raise AgentError(ExitCode.UPLOAD, f"Upload failed after {attempts} attempts: {last_problem}.")
