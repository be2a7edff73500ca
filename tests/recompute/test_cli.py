"""The script's command line: verification failures, --json, and the comparison with a "live" API
served by a loopback http.server thread (the live-server test against benchhub itself is the lead's)."""

from __future__ import annotations

import base64
import copy
import gzip
import hashlib
import json
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from benchhub.api.serializers import LeaderboardRowSerializer
from tests.conftest import persona
from tests.recompute.builder import (
    SCRIPT,
    SLUG,
    SnapshotBuilder,
    load_script,
    payload,
    ratio_tg,
    tamper,
    withdrawal,
)

rc = load_script()
BOARD = f"/api/v1/leaderboard/?campaign={SLUG}"


class FakeServer:
    """Serves fixed bodies (and headers) by path (query included); 404 for anything else."""

    def __init__(self) -> None:
        self.routes: dict[str, bytes] = {}
        self.headers: dict[str, dict[str, str]] = {}
        routes, headers = self.routes, self.headers

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                body = routes.get(self.path)
                self.send_response(200 if body is not None else 404)
                for name, value in headers.get(self.path, {}).items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(body or b'{"error": "not_found"}')

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def serve(self, snap: SnapshotBuilder, rows: list[dict[str, Any]]) -> None:
        """The snapshot with the digest headers benchhub sends, and one board."""
        data = snap.data()
        self.routes["/api/v1/snapshot/"] = data
        digest = hashlib.sha256(data).digest()
        self.headers["/api/v1/snapshot/"] = {
            "Repr-Digest": f"sha-256=:{base64.b64encode(digest).decode()}:",
            "X-Snapshot-Sha256": digest.hex(),
        }
        self.routes[BOARD] = json.dumps({"campaign": SLUG, "baseline": "upstream", "rows": rows}).encode()


@pytest.fixture
def live() -> Iterator[FakeServer]:
    server = FakeServer()
    thread = threading.Thread(target=server.httpd.serve_forever, daemon=True)
    thread.start()
    yield server
    server.httpd.shutdown()
    server.httpd.server_close()
    thread.join()


def three_machines() -> SnapshotBuilder:
    snap = SnapshotBuilder()
    snap.add("ada", payload({"upstream": {1: [100, 100], 4: [80, 80]}, "01": {1: [120, 120], 4: [100, 104]}}))
    snap.add("bob", payload(ratio_tg(1.1)))
    snap.add("cole", payload(ratio_tg(1.3)), state="hidden", reason="quarantined")
    return snap


def run_main(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, list[str]]:
    code = rc.main(list(argv))
    return code, capsys.readouterr().out.splitlines()


# ------------------------------------------------------------------ a snapshot file alone


def test_json_prints_every_cell_in_the_api_row_shape(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = three_machines().write(tmp_path)
    assert rc.main(["--snapshot", str(path), "--json"]) == 0
    out, err = capsys.readouterr()
    (board,) = json.loads(out)
    assert (board["campaign"], board["baseline"]) == (SLUG, "upstream")
    # Every row field the API serves (docs/protocol.md section 7, plus backend and control), no other.
    fields = set(LeaderboardRowSerializer.Meta.fields)
    assert all(set(row) == fields for row in board["rows"])
    assert [(row["variant"], row["batch_size"], row["n_machines"]) for row in board["rows"]] == [
        ("01", 1, 2),
        ("upstream", 1, 2),
        ("01", 4, 1),
        ("upstream", 4, 1),
    ]
    assert err.strip() == "4 cells recomputed; no server given, nothing compared"


def test_the_script_runs_as_a_program(tmp_path: Path) -> None:
    path = three_machines().write(tmp_path)
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--snapshot", str(path)], capture_output=True, text=True, cwd=tmp_path, timeout=60
    )
    assert (done.returncode, done.stdout.strip()) == (0, "4 cells recomputed; no server given, nothing compared")


def test_a_tampered_envelope_fails_verification(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    snap = three_machines()
    line = snap.lines[1]
    tamper(line, lambda body: body["sweep"]["runs"][0]["rows"][0].update(tg_tps=50))
    code, out = run_main(capsys, "--snapshot", str(snap.write(tmp_path)))
    assert code == 2
    key = persona("bob").keyid[:16]
    assert out[0] == f"NOT VERIFIED submission {line['id']} by bob: the signature by key {key}... does not verify"
    assert out[-1] == "1 envelope(s) or key(s) do not verify; no cell was compared"


@pytest.mark.parametrize("how", ["another_key", "wrong_keyid", "no_key", "wrong_type"])
def test_envelopes_must_be_signed_by_their_contributor(
    how: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    snap = three_machines()
    line = snap.lines[0]
    if how == "another_key":  # signed by bob's key, listed as ada's
        line["envelope"] = json.dumps(json.loads(snap.lines[1]["envelope"]))
    elif how == "wrong_type":
        envelope = json.loads(line["envelope"])
        envelope["payloadType"] = "application/vnd.benchhub.registration.v1+json"
        line["envelope"] = json.dumps(envelope)
    data = snap.data
    contributors = snap.contributor_lines()
    if how == "wrong_keyid":
        contributors[0]["keys"][0]["keyid"] = persona("bob").keyid
    if how == "no_key":
        contributors[0]["keys"] = []
    snap.contributor_lines = lambda: contributors  # type: ignore[method-assign]
    path = tmp_path / "s.jsonl.gz"
    path.write_bytes(data())
    code, out = run_main(capsys, "--snapshot", str(path))
    assert code == 2
    assert any(text.startswith("NOT VERIFIED") for text in out), out


@pytest.mark.parametrize(
    "data",
    [b"not gzip and not json", b'{"kind": "snapshot", "cells_version": 1}\n', b""],
    ids=["garbage", "cells_version_1", "empty"],
)
def test_bad_input_exits_2(data: bytes, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "bad.jsonl.gz"
    path.write_bytes(data)
    code, out = run_main(capsys, "--snapshot", str(path))
    assert code == 2 and out[-1].startswith("bad input:")
    assert rc.main(["--snapshot", str(tmp_path / "absent.jsonl.gz")]) == 2


# ------------------------------------------------------------------ against a "live" API


def test_an_agreeing_api_exits_0(live: FakeServer, capsys: pytest.CaptureFixture[str]) -> None:
    snap = three_machines()
    rows = copy.deepcopy(snap.boards()[SLUG])
    rows[0]["speedup"] *= 1 + 1e-12  # within the relative tolerance
    rows[0]["updated_at"] = "2026-12-03T10:00:00Z"  # fields beyond the row shape are not compared
    live.serve(snap, rows)
    assert run_main(capsys, "--server", live.url) == (0, ["4 cells, 0 differ"])


@pytest.mark.parametrize("header", ["Repr-Digest", "X-Snapshot-Sha256"])
def test_a_download_whose_digest_differs_is_bad_input(
    header: str, live: FakeServer, capsys: pytest.CaptureFixture[str]
) -> None:
    snap = three_machines()
    live.serve(snap, snap.boards()[SLUG])
    other = hashlib.sha256(b"another body").digest()
    stated = {"Repr-Digest": f"sha-256=:{base64.b64encode(other).decode()}:", "X-Snapshot-Sha256": other.hex()}
    live.headers["/api/v1/snapshot/"] = {header: stated[header]}
    code, out = run_main(capsys, "--server", live.url)
    assert code == 2
    size = len(live.routes["/api/v1/snapshot/"])
    assert out == [
        f"bad input: the snapshot's {size} bytes do not have the sha256 the server states for them, {other.hex()}"
    ]


def test_one_changed_number_is_reported(live: FakeServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    snap = three_machines()
    rows = copy.deepcopy(snap.boards()[SLUG])
    assert rows[0]["variant"] == "01" and rows[0]["batch_size"] == 1
    recomputed = rows[0]["speedup"]
    rows[0]["speedup"] = recomputed * (1 + 1e-6)
    live.serve(snap, rows)
    path = snap.write(tmp_path)
    for argv in (["--server", live.url], ["--snapshot", str(path), "--server", live.url]):
        code, out = run_main(capsys, *argv)
        where = f"{SLUG} chip='Apple M5 Pro' gpu_cores=20 model=bbbbbbbbbbbb backend=metal variant=01@0c1e57098bba b=1"
        where += " campaign_version=1"
        assert (code, out) == (
            1,
            [
                f"{where}: speedup recomputed {json.dumps(recomputed)} live {json.dumps(rows[0]['speedup'])}",
                "4 cells, 1 differ",
            ],
        )


def test_missing_extra_and_exact_fields_are_reported(live: FakeServer, capsys: pytest.CaptureFixture[str]) -> None:
    snap = three_machines()
    rows = copy.deepcopy(snap.boards()[SLUG])
    gone = rows.pop(3)  # upstream b=4
    extra = {**rows[0], "batch_size": 16}
    rows[1]["excluded"] = {**rows[1]["excluded"], "hidden": 0}
    rows[1]["interval"] = "95%"
    del rows[2]["n_contributors"]
    live.serve(snap, [*rows, extra])
    code, out = run_main(capsys, "--server", live.url)
    assert code == 1
    assert out[-1] == "5 cells, 4 differ"
    text = "\n".join(out)
    at = "@0c1e57098bba"
    v1 = "campaign_version=1"
    assert f"variant=upstream{at} b={gone['batch_size']} {v1}: missing from the live API" in text
    assert f"variant=01{at} b=16 {v1}: on the live API but not recomputed" in text
    assert f'variant=upstream{at} b=1 {v1}: interval recomputed null live "95%"' in text
    assert f"variant=upstream{at} b=1 {v1}: excluded recomputed" in text
    assert f'variant=01{at} b=4 {v1}: n_contributors recomputed 1 live "<absent>"' in text
    assert len(out) == 6


def test_an_unreachable_server_exits_3(live: FakeServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    code, out = run_main(capsys, "--server", f"http://127.0.0.1:{port}")
    assert code == 3 and out[-1].startswith("server unreachable:")
    snap = three_machines()  # the snapshot is there but the leaderboard is not
    live.routes["/api/v1/snapshot/"] = snap.data()
    code, out = run_main(capsys, "--server", live.url)
    assert code == 3 and "leaderboard" in out[-1]


def test_duplicate_rows_and_other_campaigns_are_compared_too(
    live: FakeServer, capsys: pytest.CaptureFixture[str]
) -> None:
    snap = three_machines()
    other = {**snap.manifests[0], "slug": "few-row-mma"}  # no submission: no cell
    snap.manifests.append(other)
    rows = copy.deepcopy(snap.boards()[SLUG])
    live.serve(snap, [*rows, rows[2]])
    live.routes["/api/v1/leaderboard/?campaign=few-row-mma"] = json.dumps({"rows": [rows[0]]}).encode()
    code, out = run_main(capsys, "--server", live.url)
    assert code == 1
    assert out == [
        f"{SLUG} chip='Apple M5 Pro' gpu_cores=20 model=bbbbbbbbbbbb backend=metal variant=01@0c1e57098bba b=4 "
        "campaign_version=1: 2 rows on the live API",
        "few-row-mma chip='Apple M5 Pro' gpu_cores=20 model=bbbbbbbbbbbb backend=metal variant=01@0c1e57098bba b=1 "
        "campaign_version=1: "
        "on the live API but not recomputed",
        "5 cells, 2 differ",
    ]


def test_json_with_a_server_keeps_stdout_json(live: FakeServer, capsys: pytest.CaptureFixture[str]) -> None:
    snap = three_machines()
    rows = copy.deepcopy(snap.boards()[SLUG])
    live.serve(snap, rows[1:])
    assert rc.main(["--server", live.url, "--json"]) == 1
    out, err = capsys.readouterr()
    assert json.loads(out)[0]["rows"] == snap.boards()[SLUG]
    assert err.splitlines()[-1] == "4 cells, 1 differ"


def test_a_file_out_of_order_or_not_gzipped_reads_the_same(tmp_path: Path) -> None:
    snap = SnapshotBuilder()
    snap.add("ada", payload(ratio_tg(1.2), model={"label": "earliest"}))
    snap.add("bob", payload(ratio_tg(1.4), model={"label": "later"}))
    snap.lines.reverse()  # bob's line first, though received a second after ada's
    rows = snap.boards()[SLUG]
    assert {row["model"] for row in rows} == {"earliest"}
    plain = rc.parse_snapshot(gzip.decompress(snap.data()))
    assert rc.recompute(plain)[SLUG] == rows


def test_lines_out_of_their_sections_are_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    snap = three_machines()
    lines = [json.loads(line) for line in gzip.decompress(snap.data()).splitlines()]
    lines.append(lines.pop(1))  # the campaign after the submissions
    path = tmp_path / "s.jsonl.gz"
    path.write_bytes(gzip.compress(b"\n".join(json.dumps(line).encode() for line in lines)))
    code, out = run_main(capsys, "--snapshot", str(path))
    assert code == 2 and out == [
        "bad input: unexpected line kind 'campaign' (campaigns, contributors, model names, then submissions)"
    ]


def test_signed_bytes_that_repeat_a_key_are_refused_and_other_canonical_numbers_accepted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    snap = SnapshotBuilder()
    small = payload(ratio_tg(1.2))
    small["generation"][0]["repetition_score"] = 1e-05  # RFC 8785 writes 0.00001, Python 1e-05
    snap.add("ada", small)
    line = snap.add("bob", payload(ratio_tg(1.4)))
    body = json.dumps(payload(ratio_tg(1.4)), sort_keys=True, separators=(",", ":")).encode()
    body = b'{"campaign":"few-row-mma",' + body[1:]  # signed, but parsers disagree on which campaign it is
    signature = persona("bob").signing_key.sign(rc.pae(rc.SUBMISSION_TYPE, body)).signature
    line["envelope"] = json.dumps(
        {
            "payloadType": rc.SUBMISSION_TYPE,
            "payload": base64.b64encode(body).decode(),
            "signatures": [{"keyid": persona("bob").keyid, "sig": base64.b64encode(signature).decode()}],
        }
    )
    code, out = run_main(capsys, "--snapshot", str(snap.write(tmp_path)))
    assert code == 2
    assert out == [
        f"NOT VERIFIED submission {line['id']} by bob: the payload repeats a key",
        "1 envelope(s) or key(s) do not verify; no cell was compared",
    ]


def test_a_withdrawal_must_be_signed_by_the_submissions_key(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    builder = SnapshotBuilder()
    line = builder.add("ada", payload(tg=ratio_tg(1.5)), state="withdrawn")
    builder.add("bob", payload(tg=ratio_tg(1.2)))
    for forged, expected in ((withdrawal(line["id"], persona("bob")), 2), (None, 2), (line["withdrawal"], 0)):
        line["withdrawal"] = forged
        code, _ = run_main(capsys, "--snapshot", str(builder.write(tmp_path)))
        assert code == expected


def test_without_pynacl_it_says_so_in_one_sentence_and_exits_4(tmp_path: Path) -> None:
    """A Python without PyNaCl (an importable stand-in that fails as a missing module does): no
    traceback, and not exit 1, which means "cells differ"."""
    (tmp_path / "nacl").mkdir()
    (tmp_path / "nacl" / "__init__.py").write_text("raise ModuleNotFoundError(\"No module named 'nacl'\")\n")
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--snapshot", str(tmp_path / "none.jsonl.gz")],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert done.returncode == 4, done.stderr
    assert done.stderr.strip().count("\n") == 0 and "Traceback" not in done.stderr
    assert "pip install pynacl" in done.stderr
    shown = subprocess.run([sys.executable, str(SCRIPT), "--help"], capture_output=True, text=True, env=env, timeout=60)
    assert shown.returncode == 0 and "4 PyNaCl is missing" in shown.stdout


def test_a_held_submission_names_why(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    snap = three_machines()
    line = snap.add("dina", payload(ratio_tg(1.2)), state="held")
    line["held"] = ["model_conflict"]
    assert run_main(capsys, "--snapshot", str(snap.write(tmp_path)))[0] == 0
    line["held"] = []
    code, out = run_main(capsys, "--snapshot", str(snap.write(tmp_path)))
    assert code == 2 and "held without one of quarantined, model_conflict" in out[-1]
