"""The only module that speaks HTTP. Tests that need a server run a live one, or patch this seam.

A server may be hostile, so every exchange is bounded three ways:
- size: an answer is read in chunks and abandoned at its cap, never whole into memory first;
- place: a GET's redirect is followed only to a URL the agent would have accepted to begin with (https,
  or plain http to this machine), checked before the request to it is sent; a POST is not redirected;
- time: each request has an overall deadline from connect to last byte (retries and backoff
  included), and each phase of a run that makes several (loading a campaign: its manifest and its
  patches) has one too. Per-read timeouts alone let a server that trickles a byte at a time hold the agent forever.
Past a deadline the run stops with exit code 15 (`deadline`).

Retries (a POST that may succeed later: no connection, 429, 5xx) are urllib3's `Retry` on the
requests adapter, with exponential backoff and the server's Retry-After, capped.
"""

from __future__ import annotations

import ipaddress
import json
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, TypeVar
from urllib.parse import urljoin, urlsplit

import requests
from requests.adapters import HTTPAdapter
from urllib3.util.retry import Retry

from . import __version__
from .errors import AgentError, ExitCode

USER_AGENT = f"benchhub-agent/{__version__}"
# A closed port or a wrong host name fails within the connect timeout, before anything is built.
TIMEOUT_S = (5, 30)  # per connect and per read
REQUEST_DEADLINE_S = 60.0  # one GET, connect to last byte
UPLOAD_DEADLINE_S = 300.0  # one POST, all its retries and waits included
CAMPAIGN_DEADLINE_S = 300.0  # the phase that loads a campaign: its manifest and every patch
RETRY_AFTER_MAX_S = 60  # a server's Retry-After is honoured up to this
RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})
MAX_REDIRECTS = 5
JSON_CAP_BYTES = 1024 * 1024  # a campaign manifest is a few kB
PATCH_CAP_BYTES = 4 * 1024 * 1024  # the bundled patches are 7 and 24 kB
_CHUNK = 64 * 1024
T = TypeVar("T")


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
    """The --server URL (or $BENCHHUB_SERVER) as the agent will use it, checked before anything is sent."""
    problem = url_problem(server)
    if problem is None and urlsplit(server).path.strip("/"):
        problem = f"has a path ({urlsplit(server).path!r}): give the site's address alone, e.g. https://host"
    if problem:
        raise AgentError(ExitCode.USAGE, f"--server (or BENCHHUB_SERVER) {server[:200]!r} {problem}.")
    return server


@dataclass(frozen=True)
class Response:
    status: int
    body: dict[str, Any]


def _url(server: str, path: str) -> str:
    return server.rstrip("/") + path


class TooLarge(Exception):
    """An answer longer than its cap: the rest is never read."""


class RedirectRefused(Exception):
    def __init__(self, target: str, problem: str) -> None:
        super().__init__(f"{target[:200]} {problem}")
        self.target = target
        self.problem = problem


class _Session(requests.Session):
    """A session that never follows a redirect itself: requests reads a redirect's whole body (even with
    allow_redirects=False, to offer `Response.next`), past every cap. `_get` follows them instead."""

    def get_redirect_target(self, resp: requests.Response) -> str | None:
        return None


def _session(retry: Retry | None = None) -> requests.Session:
    session = _Session()
    session.headers["User-Agent"] = USER_AGENT
    if retry is not None:
        adapter = HTTPAdapter(max_retries=retry)
        session.mount("http://", adapter)
        session.mount("https://", adapter)
    return session


def _get(session: requests.Session, url: str) -> requests.Response:
    """GET `url`, following at most MAX_REDIRECTS redirects, each target checked by `url_problem` before
    anything is sent to it. A redirect's own body is never read (requests would read it whole)."""
    for _ in range(MAX_REDIRECTS + 1):
        response = session.get(url, timeout=TIMEOUT_S, stream=True)
        if not response.is_redirect:
            return response
        target = urljoin(url, response.headers["Location"])
        response.close()
        problem = url_problem(target)
        if problem:
            raise RedirectRefused(target, problem)
        url = target
    raise requests.TooManyRedirects(f"more than {MAX_REDIRECTS} redirects")


def upload_retry(attempts: int = 5, backoff_s: float = 1.0) -> Retry:
    """Retry what may succeed later: no connection, a read cut short, 429 and 5xx. urllib3 waits
    0, 2, 4, 8... times `backoff_s` between attempts, or the server's Retry-After (at most a minute)."""
    return Retry(
        total=attempts - 1,
        status_forcelist=RETRY_STATUSES,
        allowed_methods=None,  # POST too: the server answers an identical envelope with the same result
        backoff_factor=backoff_s,
        raise_on_status=False,  # the last answer is returned, so its status is reported
        respect_retry_after_header=True,
        retry_after_max=RETRY_AFTER_MAX_S,
    )


# The phase of the run now under way, if it has a deadline: (what it is, its limit, when it ends).
_phase: tuple[str, float, float] | None = None


@contextmanager
def phase(what: str, limit_s: float) -> Iterator[None]:
    """Every request inside ends by this phase's deadline as well as its own (nested phases keep the
    sooner)."""
    global _phase
    outer = _phase
    ends = time.monotonic() + limit_s
    _phase = outer if outer is not None and outer[2] <= ends else (what, limit_s, ends)
    try:
        yield
    finally:
        _phase = outer


def bounded(call: Callable[[], T], limit_s: float, what: str) -> T:
    """`call()`'s value or exception, or AgentError(DEADLINE) once `limit_s` (or the phase) runs out.
    The call runs on a daemon thread the agent stops waiting for: a blocked socket read cannot be
    interrupted portably, and the process exits with its code without it."""
    now = time.monotonic()
    wait, reason = limit_s, f"{what} took longer than its {limit_s:.0f} s deadline"
    if _phase is not None and _phase[2] - now < wait:
        wait, reason = max(_phase[2] - now, 0.0), f"{_phase[0]} took longer than its {_phase[1]:.0f} s deadline"
    outcome: dict[str, Any] = {}

    def work() -> None:
        try:
            outcome["value"] = call()
        except BaseException as error:  # handed to the caller's thread below
            outcome["error"] = error

    worker = threading.Thread(target=work, name="benchhub-request", daemon=True)
    worker.start()
    worker.join(wait)
    if worker.is_alive():
        raise AgentError(ExitCode.DEADLINE, f"Stopped waiting: {reason}.")
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]


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


def _redirect_refused(url: str, error: RedirectRefused) -> AgentError:
    return AgentError(ExitCode.MANIFEST, f"{url[:200]} redirected to {error}: refused.")


def get_json(server: str, path: str, max_bytes: int = JSON_CAP_BYTES) -> Response:
    check_server(server)
    url = _url(server, path)

    def fetch() -> Response:
        with _session() as session, _get(session, url) as response:
            return Response(response.status_code, _capped_json(response, max_bytes))

    try:
        return bounded(fetch, REQUEST_DEADLINE_S, f"GET {url[:200]}")
    except requests.RequestException as error:
        raise AgentError(ExitCode.UPLOAD, f"Could not reach {server}: {error.__class__.__name__}.") from error
    except RedirectRefused as error:
        raise _redirect_refused(url, error) from error
    except TooLarge as error:
        raise AgentError(ExitCode.MANIFEST, f"{url} answered more than {max_bytes} bytes of JSON: refused.") from error


def download(url: str, max_bytes: int = PATCH_CAP_BYTES) -> bytes:
    problem = url_problem(url)
    if problem:
        raise AgentError(ExitCode.MANIFEST, f"The download URL {url[:200]!r} {problem}: refused.")

    def fetch() -> bytes:
        with _session() as session, _get(session, url) as response:
            if response.status_code != 200:
                raise AgentError(ExitCode.CAMPAIGN, f"Could not download {url}: HTTP {response.status_code}.")
            return _capped(response, max_bytes)

    try:
        return bounded(fetch, REQUEST_DEADLINE_S, f"the download of {url[:200]}")
    except requests.RequestException as error:
        raise AgentError(ExitCode.CAMPAIGN, f"Could not download {url}: {error.__class__.__name__}.") from error
    except RedirectRefused as error:
        raise _redirect_refused(url, error) from error
    except TooLarge as error:
        raise AgentError(
            ExitCode.MANIFEST, f"{url} is larger than the {max_bytes // 1024 // 1024} MB a patch may be: refused."
        ) from error


def post_envelope(server: str, path: str, body: bytes, attempts: int = 5, backoff_s: float = 1.0) -> Response:
    """POST signed bytes, retried by urllib3 (`upload_retry`). Retrying is safe: the server answers an
    identical envelope with the same result."""
    check_server(server)
    url = _url(server, path)
    # Not redirected (see _Session): the service answers its API where it is asked.
    options: dict[str, Any] = {"timeout": TIMEOUT_S, "stream": True}
    headers = {"Content-Type": "application/json"}

    def send() -> Response:
        with (
            _session(upload_retry(attempts, backoff_s)) as session,
            session.post(url, data=body, headers=headers, **options) as response,
        ):
            if response.status_code in RETRY_STATUSES:
                raise AgentError(
                    ExitCode.UPLOAD, f"Upload failed after {attempts} attempts: HTTP {response.status_code}."
                )
            return Response(response.status_code, _capped_json(response, JSON_CAP_BYTES))

    try:
        return bounded(send, UPLOAD_DEADLINE_S, f"POST {url[:200]}")
    except requests.RequestException as error:
        raise AgentError(
            ExitCode.UPLOAD,
            f"Upload failed after {attempts} attempts: could not reach {server} ({error.__class__.__name__}).",
        ) from error
    except TooLarge as error:
        raise AgentError(ExitCode.UPLOAD, f"{url} answered more than {JSON_CAP_BYTES} bytes.") from error
