from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from benchhub_agent import client, source
from benchhub_agent.dirs import home
from benchhub_agent.errors import AgentError, ExitCode


def git(*args: str, cwd: Path) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


def test_it_fetches_exactly_one_commit_and_reuses_it(tmp_path: Path) -> None:
    upstream = tmp_path / "upstream"
    upstream.mkdir()
    git("init", "-q", cwd=upstream)
    git("config", "uploadpack.allowAnySHA1InWant", "true", cwd=upstream)
    (upstream / "CMakeLists.txt").write_text("project(first)\n")
    git("add", ".", cwd=upstream)
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "first", cwd=upstream)
    pinned = git("rev-parse", "HEAD", cwd=upstream)
    (upstream / "CMakeLists.txt").write_text("project(second)\n")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qam", "second", cwd=upstream)

    tree = source.from_git(f"file://{upstream}", pinned, home())
    assert (tree / "CMakeLists.txt").read_text() == "project(first)\n"
    store = home().sources / "git-objects"
    assert git("rev-list", "--count", f"refs/benchhub/{pinned}", cwd=store) == "1"  # the commit, no history
    assert source.from_git(f"file://{upstream}", pinned, home()) == tree


def test_it_names_the_commit_it_could_not_fetch(tmp_path: Path) -> None:
    with pytest.raises(AgentError) as caught:
        source.from_git(f"file://{tmp_path}/absent", "a" * 40, home())
    assert caught.value.code == ExitCode.SOURCE and "aaaaaaaaaaaa" in caught.value.message
    assert not list(home().sources.glob(f"git-{'a' * 40}*"))  # no tree, not even a partial one


def test_it_retries_with_growing_delays_then_gives_up_with_the_reason(monkeypatch: pytest.MonkeyPatch) -> None:
    import urllib3.util.retry

    waits: list[float] = []
    monkeypatch.setattr(urllib3.util.retry.time, "sleep", waits.append)  # urllib3's Retry does the waiting
    with pytest.raises(AgentError) as caught:
        client.post_envelope("http://127.0.0.1:9", "/api/v1/submissions/", b"{}", attempts=4)
    assert waits == [2.0, 4.0]  # urllib3: the first retry at once, then doubling
    assert caught.value.code == ExitCode.UPLOAD and "after 4 attempts" in caught.value.message


def test_git_never_reads_a_repo_or_commit_as_an_option_even_unchecked(tmp_path: Path) -> None:
    """The manifest's rules refuse these first; `--` before git's positional arguments is the second wall."""
    fetched, cloned = tmp_path / "pwned-by-fetch", tmp_path / "pwned-by-repo"
    with pytest.raises(AgentError):
        source.from_git("/", f"--upload-pack=touch {fetched};:", home())
    with pytest.raises(AgentError):
        source.from_git(f"--upload-pack=touch {cloned};:", "0" * 40, home())
    assert not fetched.exists() and not cloned.exists()


def test_it_stops_reading_an_answer_at_its_cap(tmp_path: Path) -> None:
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class Endless(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: object) -> None:
            pass

        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Length", str(10 * 1024 * 1024))  # honest header, too large
            self.end_headers()

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Endless)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{httpd.server_address[1]}"
    try:
        with pytest.raises(AgentError) as caught:
            client.get_json(url, "/api/v1/campaigns/x/")
        assert caught.value.code == ExitCode.MANIFEST and "more than 1048576 bytes" in caught.value.message
        with pytest.raises(AgentError) as too_big:
            client.download(f"{url}/p.patch")
        assert too_big.value.code == ExitCode.MANIFEST and "larger than the 4 MB" in too_big.value.message
    finally:
        httpd.shutdown()
        httpd.server_close()


def test_it_talks_plain_http_only_to_this_machine() -> None:
    for local in ("http://127.0.0.1:8000", "http://127.9.9.9", "http://[::1]:8000", "http://localhost:8000"):
        assert client.url_problem(local) is None
    assert client.url_problem("https://benchhub.example") is None
    assert "plain http" in (client.url_problem("http://benchhub.example") or "")
    assert "plain http" in (client.url_problem("http://10.0.0.1") or "")
    assert client.url_problem("https://user:pw@benchhub.example") == "carries a user name or password"
    assert client.url_problem("file:///etc/passwd") == "is not an http(s) URL"
    assert client.url_problem("https://bench hub.example") == "holds spaces or control characters"


def test_git_reaches_a_repository_over_https_or_file_only(tmp_path: Path) -> None:
    """Plain http (what a redirect could downgrade to) is not a protocol git may use: nothing is asked."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    asked: list[str] = []

    class Recording(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: object) -> None:
            pass

        def do_GET(self) -> None:
            asked.append(self.path)
            self.send_error(404)

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Recording)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        with pytest.raises(AgentError) as caught:
            source.from_git(f"http://127.0.0.1:{httpd.server_address[1]}/llama.cpp", "0" * 40, home())
        assert caught.value.code == ExitCode.SOURCE and "not allowed" in caught.value.message
        assert asked == []
    finally:
        httpd.shutdown()
        httpd.server_close()
