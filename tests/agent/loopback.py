"""A real HTTP server on 127.0.0.1 for the agent's tests: the HTTP seam, which a hostile or a stub server
stands behind. It serves the bundled campaign as the service publishes it, lets a test craft any field,
and answers POSTs a test defines."""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from benchhub_protocol import campaign_versions, envelope

from tests.versioning import DEV_CAMPAIGN_KEY

DATA = Path(__file__).parents[2] / "agent" / "benchhub_agent" / "data"
CAMPAIGNS = Path(__file__).parents[2] / "protocol" / "benchhub_protocol" / "campaigns"
SLUG = "mv-ext-iquants"
FIFTY_MB = 50 * 1024 * 1024
TRICKLE_S = 0.2
TRICKLE_FOR_S = 30.0


class HostileServer:
    """Serves a campaign manifest, the patches it names, and a 50 MB patch that counts what it sent;
    answers POSTs from `posts` (path -> function of the body giving status and JSON) and keeps them."""

    def __init__(self) -> None:
        self.manifest: dict[str, Any] = {}
        self.files: dict[str, bytes] = {}
        self.big_bytes_sent = 0
        self.posts: dict[str, Callable[[bytes], tuple[int, dict[str, Any]]]] = {}
        self.received: list[tuple[str, bytes]] = []
        self.requested: list[str] = []  # every GET path, in order
        self.redirects: dict[str, str] = {}  # GET path -> Location of a 302
        self.heavy_redirects: set[str] = set()  # of those, the ones whose 302 carries a 50 MB body
        self.trickled: set[str] = set()  # GET paths answered one byte every TRICKLE_S, for at most TRICKLE_FOR_S
        self.stopping = threading.Event()
        # Sign every manifest as served, as a holder of the stolen campaign key would: what the agent
        # then refuses, it refuses by its field checks, past the signature.
        self.stolen_key = False
        handler = self._handler()
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                server.requested.append(self.path)
                if self.path in server.heavy_redirects:
                    self._stream_big(server.redirects[self.path])
                elif self.path in server.redirects:
                    self.send_response(302)
                    self.send_header("Location", server.redirects[self.path])
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                elif self.path in server.trickled:
                    self._trickle()
                elif self.path == "/api/v1/campaigns/":
                    self._send(json.dumps({"results": [{"slug": SLUG}]}).encode(), "application/json")
                elif self.path == f"/api/v1/campaigns/{SLUG}/":
                    if server.stolen_key:
                        server.sign()
                    self._send(json.dumps(server.manifest).encode(), "application/json")
                elif self.path == "/big.patch":
                    self._stream_big()
                elif self.path.startswith("/patches/") and self.path[9:] in server.files:
                    self._send(server.files[self.path[9:]], "text/x-diff")
                else:
                    self.send_error(404)

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                server.received.append((self.path, body))
                answer = server.posts.get(self.path)
                if answer is None:
                    self.send_error(404)
                    return
                status, reply = answer(body)
                self._send(json.dumps(reply).encode(), "application/json", status)

            def _send(self, body: bytes, kind: str, status: int = 200) -> None:
                self.send_response(status)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def _trickle(self) -> None:
                # Headers at once, then a byte at a time: each read is well within any per-read timeout.
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(1 << 20))
                self.end_headers()
                stop = time.monotonic() + TRICKLE_FOR_S
                try:
                    while time.monotonic() < stop and not server.stopping.wait(TRICKLE_S):
                        self.wfile.write(b" ")
                        self.wfile.flush()
                except (BrokenPipeError, ConnectionResetError):
                    pass

            def _stream_big(self, location: str | None = None) -> None:
                # No Content-Length: the agent must cut the stream itself, not trust a header.
                self.send_response(302 if location else 200)
                if location:
                    self.send_header("Location", location)
                self.send_header("Content-Type", "text/x-diff")
                self.send_header("Connection", "close")
                self.end_headers()
                chunk = b"+" * 65536
                try:
                    while server.big_bytes_sent < FIFTY_MB:
                        self.wfile.write(chunk)
                        server.big_bytes_sent += len(chunk)
                except (BrokenPipeError, ConnectionResetError):
                    pass

        return Handler

    def serve_bundled(self) -> None:
        """The bundled campaign's newest version as the service publishes it: signed, patches by URL."""
        definition = json.loads((CAMPAIGNS / SLUG / "v1.json").read_text())
        for variant in definition["variants"]:
            for patch in variant["patches"]:
                self.files[patch["name"]] = (DATA / "patches" / patch["name"]).read_bytes()
                patch["url"] = self.patch_url(patch["name"])
            variant["available"] = True
        self.manifest = definition

    def sign(self, signer: envelope.Signer = DEV_CAMPAIGN_KEY) -> None:
        """Sign the manifest as it is now, as a holder of the campaign key would (the agent trusts the
        development key): what the agent then refuses, it refuses past the signature check."""
        self.manifest["signature"] = campaign_versions.sign(self.manifest, signer)

    def patch_url(self, name: str) -> str:
        return f"{self.url}/patches/{name}"

    def add_patch(self, variant: int, name: str, data: bytes, url: str | None = None) -> None:
        """A patch added to a variant: a change the campaign key did not sign, until `sign`."""
        self.files[name] = data
        entry = {"name": name, "sha256": hashlib.sha256(data).hexdigest(), "url": url or self.patch_url(name)}
        self.manifest["variants"][variant]["patches"].append(entry)


@contextmanager
def running() -> Iterator[HostileServer]:
    server = HostileServer()
    server.serve_bundled()
    thread = threading.Thread(target=server.httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.stopping.set()
        server.httpd.shutdown()
        server.httpd.server_close()
