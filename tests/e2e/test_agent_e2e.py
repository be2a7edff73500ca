"""End to end, for real: llama.cpp built from the pinned source tarball with the campaign's patches,
Gemma 3 270M turned into IQ2_XXS, `benchhub-agent run` (the installed console script) against a live
benchhub server on PostgreSQL, then the submission and the leaderboard read back through the API.

The build and the model are cached under $BENCHHUB_FIXTURES (agent-home/, gemma-3-270m-IQ2_XXS.gguf),
outside the repository, so a second CI run on the same machine builds nothing.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import requests
from benchhub_agent import build, campaign, source
from benchhub_agent.dirs import home
from benchhub_agent.sweep import WARMUP_SIZES, measured_rows
from benchhub_agent.tools import parse_batched_bench_jsonl, run_tool
from django.core.management import call_command

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

FIXTURES = Path(os.environ.get("BENCHHUB_FIXTURES", Path.home() / ".cache" / "benchhub-fixtures"))
TARBALL = FIXTURES / "llama.cpp-0c1e570.tar.gz"
GEMMA_Q4 = FIXTURES / "gemma-3-270m-q4_k_m.gguf"
GEMMA_IQ2 = FIXTURES / "gemma-3-270m-IQ2_XXS.gguf"
AGENT_HOME = FIXTURES / "agent-home"
BATCH_SIZES = (1, 2)  # at the campaign's npp 128 and ntg 64, CPU decoding is slow: two sizes, one pair of rounds
QUANT_TOOLS = ("llama-quantize", "llama-imatrix")


@pytest.fixture
def agent_home(monkeypatch: pytest.MonkeyPatch) -> Path:
    if not TARBALL.is_file() or not GEMMA_Q4.is_file():
        pytest.fail(f"Fixtures missing in {FIXTURES}: run `make fixtures` (scripts/fixtures.sh) first.")
    monkeypatch.setenv("BENCHHUB_HOME", str(AGENT_HOME))
    return AGENT_HOME


def quantized_model(pristine: Path) -> Path:
    """IQ2_XXS needs an importance matrix: 8 chunks of 256 tokens of llama.cpp's own docs are enough."""
    if GEMMA_IQ2.is_file():
        return GEMMA_IQ2
    plan = campaign.bundled("mv-ext-iquants")
    work = FIXTURES / "quantize-work"
    work.mkdir(parents=True, exist_ok=True)
    tools = build.build_variants(
        [plan.variant(plan.baseline)],
        pristine,
        build.BuildConfig("cpu"),
        home(),
        work,
        lambda detail, fraction: None,
        targets=QUANT_TOOLS,
    )[0].bin_dir
    text = work / "calibration.txt"
    text.write_text("\n\n".join(path.read_text() for path in sorted((pristine / "docs").glob("*.md"))))
    imatrix = work / "imatrix.gguf"
    done = run_tool(
        [
            str(tools / "llama-imatrix"),
            "-m",
            str(GEMMA_Q4),
            "-f",
            str(text),
            "-o",
            str(imatrix),
            "--chunks",
            "8",
            "-c",
            "256",
        ],
        work / "imatrix",
    )
    assert done.exit_code == 0, done.stderr[-2000:]
    partial = GEMMA_IQ2.with_suffix(".partial")
    done = run_tool(
        [
            str(tools / "llama-quantize"),
            "--allow-requantize",
            "--imatrix",
            str(imatrix),
            str(GEMMA_Q4),
            str(partial),
            "IQ2_XXS",
        ],
        work / "quantize",
    )
    assert done.exit_code == 0, done.stderr[-2000:]
    partial.rename(GEMMA_IQ2)
    return GEMMA_IQ2


def run_agent(*args: str) -> subprocess.CompletedProcess[str]:
    agent = shutil.which("benchhub-agent", path=str(Path(sys.executable).parent))
    assert agent, "the benchhub-agent console script is not installed"
    return subprocess.run(
        [agent, *args],
        capture_output=True,
        text=True,
        timeout=3600,
        env={**os.environ, "BENCHHUB_HOME": str(AGENT_HOME)},
    )


def medians_printed_by_the_tool(logs: Path) -> dict[tuple[str, int], float]:
    """tg t/s per (variant, batch size) straight from batched-bench's own output files."""
    values: dict[tuple[str, int], list[float]] = {}
    for stdout in sorted(logs.glob("batched-bench-*.stdout")):
        variant = stdout.name.split("-", 3)[3].rsplit("-rep", 1)[0]
        rows = parse_batched_bench_jsonl(stdout.read_text())
        for row in measured_rows(rows, BATCH_SIZES, BATCH_SIZES[:WARMUP_SIZES]):  # the warm-up rows dropped
            values.setdefault((variant, row["batch_size"]), []).append(row["tg_tps"])
    return {key: statistics.median(reps) for key, reps in values.items()}


def test_it_builds_measures_signs_and_publishes_a_real_run(agent_home: Path, live_server: Any, tmp_path: Path) -> None:
    from benchhub.results.campaigns import sync_campaigns
    from benchhub.results.models import Campaign

    sync_campaigns(Campaign)
    pristine = source.from_user(TARBALL, home())
    model = quantized_model(pristine)

    done = run_agent(
        "run",
        str(model),
        "--server",
        live_server.url,
        "--llama-src",
        str(TARBALL),
        "--backend",
        "cpu",
        "--batch-sizes",
        ",".join(map(str, BATCH_SIZES)),
        # The campaign's npp/ntg (other settings would be flagged nonstandard_sweep and kept out of the
        # cells); one balanced block of rounds (3 rotated rounds for 3 variants: the fewest standard sweep)
        # and two batch sizes keep it fast.
        "--reps",
        "2",
        "--max-reps",
        "2",
        "--gen-tokens",
        "32",
        "--label",
        "Gemma 3 270M IQ2_XXS (e2e)",
        "--handle",
        "e2e-ci",
        "--yes",
        "--json",
        "--out",
        str(tmp_path / "copy.json"),
    )
    assert done.returncode == 0, done.stderr[-4000:]
    summary = json.loads(done.stdout)
    assert summary["uploaded"] and summary["url"].startswith(live_server.url)
    result_file = Path(summary["result"])
    logs = Path(summary["logs"])

    api = f"{live_server.url}/api/v1"
    submission = requests.get(f"{api}/submissions/{summary['id']}/", timeout=30).json()
    stored = requests.get(f"{api}/submissions/{summary['id']}/envelope", timeout=30)
    assert stored.content == result_file.read_bytes()  # byte for byte what the agent signed
    assert (tmp_path / "copy.json").read_bytes() == stored.content
    verified = run_agent("verify", str(result_file))
    assert verified.returncode == 0 and verified.stdout.startswith("OK: signed by"), verified.stderr

    payload = json.loads(Path(logs.parent / "payload.json").read_text())
    assert [variant["name"] for variant in payload["variants"]] == ["upstream", "01", "01+02"]
    assert payload["model"]["file_type"] == "IQ2_XXS" and payload["model"]["architecture"] == "gemma3"
    assert payload["machine"]["backend"] == "cpu" and payload["machine"]["os"] == "Linux"
    # Honest on CPU: nothing was compared, so nothing passed.
    assert {entry["status"] for entry in payload["correctness"]} == {"not_run"}
    assert all("CPU-only" in entry["reason"] for entry in payload["correctness"])
    # Patches 01/02 touch only Metal sources: on CPU every variant must print the same bytes.
    assert len(payload["generation"]) == 9
    assert all(entry["identical_to_baseline"] for entry in payload["generation"])
    assert all(entry["n_tokens"] > 0 for entry in payload["generation"])
    assert "variant_output_mismatch" not in payload["flags"] and "correctness_failed" not in payload["flags"]
    # --reps 2 rounds up to one whole block: 3 rounds of the 3 variants, each variant once in each position.
    assert len(payload["sweep"]["runs"]) == 9 and all(run["exit_code"] == 0 for run in payload["sweep"]["runs"])
    assert submission["id"] == summary["id"] and "nonstandard_sweep" not in submission["flags"]

    printed = medians_printed_by_the_tool(logs)
    assert set(printed) == {(name, size) for name in ("upstream", "01", "01+02") for size in BATCH_SIZES}
    detail = requests.get(f"{api}/submissions/{summary['id']}/", timeout=30).json()
    measured = {(row["variant"], row["batch_size"]): row for row in detail["measurements"]}
    for (variant, size), median in printed.items():
        row = measured[(variant, size)]
        assert row["tg_tps"] == pytest.approx(median, rel=1e-6)
        assert row["baseline_tg_tps"] == pytest.approx(printed[("upstream", size)], rel=1e-6)
        assert row["excluded_reason"] == "correctness_not_run"

    # A CPU-only build has no device backend to check against: its rows are in the cells, counted as
    # left out for that reason, never in a median (docs/protocol.md section 7).
    call_command("refresh_cells", summary["id"])
    board = requests.get(
        f"{api}/leaderboard/", params={"campaign": "mv-ext-iquants", "quant": "IQ2_XXS"}, timeout=30
    ).json()
    rows = {(row["variant"], row["batch_size"]): row for row in board["rows"]}
    assert set(rows) == set(printed)
    for row in rows.values():
        assert (row["n_machines"], row["speedup"], row["excluded"]["correctness_not_run"]) == (0, None, 1)

    # The same inputs again: every variant comes from the binary cache, nothing is compiled.
    plan = campaign.bundled("mv-ext-iquants")
    again = build.build_variants(
        list(plan.variants),
        pristine,
        build.BuildConfig("cpu"),
        home(),
        tmp_path / "logs",
        lambda detail, fraction: None,
    )
    assert [item.cached for item in again] == [True, True, True]
