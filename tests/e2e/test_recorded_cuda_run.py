"""The agent's CUDA path, run for real on an NVIDIA H200 and replayed here (no GPU in CI).

The recording (tests/agent/fixtures/cuda-h200-run/README.md says how it was made) holds the raw
tool logs, the signed result and the throwaway key that signed it. Replaying shows that the
parsers turn those logs into exactly the numbers that were signed, that correctness was a real
CUDA0 pass (not `not_run`), and that the signed result travels through the real `upload` command
to a live server whose leaderboard then carries the CUDA rows at their median round-paired ratios.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import requests
from benchhub_agent import campaign, keys
from benchhub_agent.cli import main
from benchhub_agent.tools import parse_batched_bench_jsonl, parse_test_backend_ops
from benchhub_protocol import cycles, envelope, rounds
from benchhub_protocol.rounds import sweep_differences
from click.testing import CliRunner
from django.core.management import call_command

RUN = Path(__file__).parents[1] / "agent" / "fixtures" / "cuda-h200-run"
PAYLOAD: dict[str, Any] = json.loads((RUN / "payload.json").read_text())


def test_it_verifies_the_recorded_signed_result() -> None:
    opened = envelope.open_envelope(json.loads((RUN / "envelope.json").read_bytes()), envelope.SUBMISSION_TYPE)
    signer = keys.read_key(RUN / "home" / "config" / "keys" / "ed25519.seed")
    assert envelope.verify_signature(opened, signer.keyid, signer.public_key)
    assert envelope.parse_canonical_payload(opened.payload) == PAYLOAD
    assert PAYLOAD["machine"]["backend"] == "cuda" and PAYLOAD["machine"]["gpu_name"] == "NVIDIA H200"


def test_it_reparses_the_recorded_logs_into_the_signed_numbers() -> None:
    logs = RUN / "logs"
    outcome = parse_test_backend_ops(
        (logs / "test-backend-ops-upstream.stdout").read_text(),
        (logs / "test-backend-ops-upstream.stderr").read_text(),
        0,
        "CUDA0",
    )
    signed = next(entry for entry in PAYLOAD["correctness"] if entry["variant"] == "upstream")
    assert (outcome.status, outcome.passed, outcome.failed) == ("pass", 1304, 0)
    assert (signed["status"], signed["passed"], signed["failed"], signed["backend"]) == ("pass", 1304, 0, "CUDA0")
    for run in PAYLOAD["sweep"]["runs"]:
        stem = f"batched-bench-{run['seq']:03d}-{run['variant']}-rep{run['rep']}"
        assert parse_batched_bench_jsonl((logs / f"{stem}.stdout").read_text()) == run["rows"], stem


@pytest.mark.django_db(transaction=True)
def test_it_uploads_the_recorded_result_whose_mirrored_rounds_count_nowhere_under_cells_v4(
    live_server: Any, settings: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from benchhub.results.campaigns import sync_campaigns
    from benchhub.results.models import Campaign, Submission

    settings.PATCHES_DIR = RUN / "patches"
    sync_campaigns(Campaign)
    agent_home = tmp_path / "home"
    shutil.copytree(RUN / "home", agent_home)
    monkeypatch.setenv("BENCHHUB_HOME", str(agent_home))

    answer = CliRunner().invoke(
        main, ["upload", "--server", live_server.url, "--handle", "h200-e2e", str(RUN / "envelope.json")]
    )
    assert answer.exit_code == 0, answer.output
    assert "accepted" in answer.output or "flagged" in answer.output
    # CI points Celery at Redis with no worker running here: refresh the touched cells in process.
    call_command("refresh_cells", str(Submission.objects.get(nonce=PAYLOAD["nonce"]).id))

    # The run predates whole cycles: A B C, C B A twice, so 01 always ran in the middle. Cells v4
    # (docs/protocol.md, cells) counts no row without a whole rotation cycle: stored, shown, in no cell.
    assert cycles.whole_cycles(PAYLOAD["sweep"]["runs"]) == []
    stored = Submission.objects.get(nonce=PAYLOAD["nonce"])
    assert {m.excluded_reason for m in stored.measurements.all()} == {"nonstandard_sweep"}
    url = f"{live_server.url}/api/v1/leaderboard/?campaign=mv-ext-iquants&quant=IQ2_XXS"
    rows = [row for row in requests.get(url, timeout=30).json()["rows"] if row["chip"] == PAYLOAD["machine"]["chip"]]
    assert rows == []


def test_it_reads_the_recorded_run_as_standard_and_imprecise_by_the_shared_rule() -> None:
    # 4 rounds where the campaign asks for at least 2: standard. At 2-30% spread, no cell reached ±1%.
    assert sweep_differences(PAYLOAD["sweep"], campaign.bundled("mv-ext-iquants").sweep) == []
    assert rounds.high_spread(PAYLOAD["sweep"], PAYLOAD["variants"][0]["name"])
    assert "high_spread" in PAYLOAD["flags"]
