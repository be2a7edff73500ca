"""The sweep's honesty on a fake fast machine (tests/agent/fake_machine.py): whole cycles in a recorded random
order, a stop that fires once every cell is settled, and a disturbed round that neither moves the printed change
nor goes unnamed."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

import pytest
from benchhub_agent import report, sweep
from benchhub_agent.cli import main
from benchhub_agent.sweep import SweepSettings
from benchhub_protocol import cycles, rounds, schema
from click.testing import CliRunner

from tests.agent import fake_machine

NAMES = ("upstream", "01", "01+02")
SIZES = (1, 2, 4, 8)


def settings(**changes: Any) -> SweepSettings:
    base: dict[str, Any] = {
        "npp": 128,
        "ntg": 32,
        "batch_sizes": SIZES,
        "reps": 2,
        "max_reps": 30,
        "flash_attn": True,
        "n_gpu_layers": 99,
    }
    return SweepSettings(**{**base, **changes})


def run_on(tmp_path: Path, speedups: dict[str, float], **machine: Any) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    bins = fake_machine.make(tmp_path / "machine", speedups, **machine)
    runs, flags, _, stop = sweep.run_sweep(
        [(name, bins[name], {}) for name in speedups], Path("m.gguf"), settings(), tmp_path / "logs", lambda *_: None
    )
    return runs, {"flags": flags, **stop}


def payload(runs: list[dict[str, Any]], stop: dict[str, Any], names: tuple[str, ...] = NAMES) -> dict[str, Any]:
    return {
        "variants": [{"name": name, "commit": "0c1e57098bba" + "0" * 28} for name in names],
        "sweep": {**settings().as_payload(runs), **{k: v for k, v in stop.items() if k != "flags"}},
        "model": {"file_name": "random.gguf", "file_type": "IQ4_NL"},
        "machine": {"chip": "Fake GPU", "backend": "cuda"},
        "correctness": [],
        "generation": [],
        "flags": stop["flags"],
    }


def test_a_cycles_order_is_a_latin_square_drawn_from_the_seed() -> None:
    for cycle in range(6):
        orders = rounds.cycle_orders(NAMES, 7, cycle)
        for position in range(3):  # every variant once in every position
            assert sorted(order[position] for order in orders) == sorted(NAMES)
        assert all(sorted(order) == sorted(NAMES) for order in orders)
    assert rounds.cycle_orders(NAMES, 7, 0) == rounds.cycle_orders(NAMES, 7, 0)  # the seed replays it
    drawn = {tuple(map(tuple, rounds.cycle_orders(NAMES, 7, cycle))) for cycle in range(12)}
    assert len(drawn) > 3  # randomised per cycle, not one rotation repeated


def test_a_quiet_machine_stops_settled_after_one_or_two_whole_cycles(tmp_path: Path) -> None:
    runs, stop = run_on(tmp_path, dict.fromkeys(NAMES, 1.0), sigma=0.001)
    n_rounds = len({run["rep"] for run in runs})
    assert stop["stop_reason"] == "settled" and n_rounds in (3, 6)
    assert "target_not_reached" not in stop["flags"]
    cells = report.cells(payload(runs, stop))
    assert all(cell["verdict"] == "within ±2%" for cell in cells if cell["variant"] != "upstream")


@pytest.mark.parametrize(
    ("sigma", "max_seconds", "reason"), [(0.001, 900.0, "settled"), (0.05, 900.0, "rounds"), (0.05, 1e-6, "time")]
)
def test_rounds_always_come_in_whole_cycles(tmp_path: Path, sigma: float, max_seconds: float, reason: str) -> None:
    bins = fake_machine.make(tmp_path / "m", dict.fromkeys(NAMES, 1.0), sigma=sigma)
    runs, _, _, stop = sweep.run_sweep(
        [(name, bins[name], {}) for name in NAMES],
        Path("m.gguf"),
        settings(max_reps=12, max_seconds=max_seconds),
        tmp_path / "logs",
        lambda *_: None,
    )
    reps = sorted({run["rep"] for run in runs})
    assert stop["stop_reason"] == reason and len(reps) % 3 == 0
    assert [rep for block in cycles.whole_cycles(runs) for rep in block] == reps  # every round counts
    # The seed in the payload replays the order the runs went in.
    for cycle, block in enumerate(cycles.whole_cycles(runs)):
        ran = [[run["variant"] for run in sorted(runs, key=lambda r: r["seq"]) if run["rep"] == rep] for rep in block]
        assert ran == rounds.cycle_orders(NAMES, stop["order_seed"], cycle)
    checked = {**payload(runs, {**stop, "flags": []})["sweep"], "order": "interleaved"}
    validator = schema.SWEEP_SCHEMA
    assert checked["stop_reason"] in validator["properties"]["stop_reason"]["enum"]


def test_a_disturbed_round_moves_the_change_less_than_one_percent_and_is_named(tmp_path: Path) -> None:
    # Process 5 (round 2, the second process of it) runs at a third of its speed: other load, as the
    # newcomer's CPU run saw (22.8 t/s against about 70). The true change of 01+02 is +10%.
    truth = {"upstream": 1.0, "01": 1.0, "01+02": 1.10}
    runs, stop = run_on(tmp_path, truth, sigma=0.002, disturb={5: 0.33})
    shown = payload(runs, stop)
    for cell in report.cells(shown):
        if cell["variant"] != "upstream":
            assert abs(math.log(cell["speedup"] / truth[cell["variant"]])) < 0.01, cell
    disturbed = next(run for run in runs if run["seq"] == 5)
    text = report.table(shown)
    assert f"Round {disturbed['rep']}: {disturbed['variant']} ran" in text and "disturbed" in text


def test_the_printed_change_is_the_sites_estimate(tmp_path: Path) -> None:
    runs, stop = run_on(tmp_path, {"upstream": 1.0, "01": 1.05}, sigma=0.01)
    for cell in report.cells(payload(runs, stop, ("upstream", "01"))):
        if cell["variant"] == "01":
            site = cycles.submission_estimate(runs, "01", "upstream", cell["batch_size"])
            assert site is not None and cell["speedup"] == site.ratio


def test_the_table_fits_80_columns_and_wraps_by_variant(tmp_path: Path) -> None:
    runs, stop = run_on(tmp_path, {"upstream": 1.0, "01": 1.0, "01+02": 1.2}, disturb={4: 0.5})
    text = report.table(payload(runs, stop))
    table_part = text
    assert max(len(line) for line in table_part.splitlines()) <= 80, table_part
    # The disturbed upstream run (process 4) moved neither change into a false verdict.
    verdicts = {(c["variant"], c["batch_size"]): c["verdict"] for c in report.cells(payload(runs, stop))}
    assert {verdicts[("01", size)] for size in SIZES} <= {"within ±2%", "unclear"}
    assert "01 against upstream:" in text and "01+02 against upstream:" in text


def test_the_stop_is_judged_at_the_level_the_cap_allows() -> None:
    assert rounds.look_level(rounds.max_looks(60, 3)) == pytest.approx(0.05 / 20)
    # The spread the device measured for an 8B model (1.0%) settles an A/A cell within the cap.
    needed = rounds.cycles_to_settle(0.010, 0.0, 3, 0.02, rounds.max_looks(rounds.MAX_ROUNDS, 3))
    assert needed is not None and needed <= 10
    # The 1B model's 3.1% does not: the table in docs/method.md says so.
    assert rounds.cycles_to_settle(0.031, 0.0, 3, 0.02, rounds.max_looks(rounds.MAX_ROUNDS, 3)) is None


GEMMA = Path(os.environ.get("BENCHHUB_FIXTURES", Path.home() / ".cache/benchhub-fixtures")) / "gemma-3-270m-q4_k_m.gguf"


def test_a_cpu_run_says_what_it_counts_as_first_shows_variant_and_round_and_fits_80_columns(
    tmp_path: Path, isolated_home: Path
) -> None:
    """A newcomer's CPU run, on the fake machine: before anything is built it says the run cannot count
    (no device backend, so correctness is not_run) and that its own binaries are flagged local_source; the
    progress names the variant and the round; the table fits 80 columns."""
    if not GEMMA.is_file():
        pytest.fail(f"{GEMMA} is missing: run `make fixtures` (scripts/fixtures.sh).")
    bins = fake_machine.make(tmp_path / "m", dict.fromkeys(NAMES, 1.0), sigma=0.001)
    args = ["run", str(GEMMA), "--backend", "cpu", "--no-upload", "--yes", "--batch-sizes", "1,2,4"]
    for name in NAMES:
        args += ["--variant", f"{name}={bins[name]}"]
    done = CliRunner().invoke(main, args)
    assert done.exit_code == 0, done.output
    text = done.output
    said = text.index("this cpu run will be an excluded row")
    assert said < text.index("Reading the model") and "local_source" in text[said : said + 400]
    assert max(len(line) for line in text[: text.index("Reading the model")].splitlines()) <= 80
    assert "round 1 of at most 60 (cycle 1), " in text and "Sweep: round 4 of at most 60 (cycle 2)" in text
    table_part = text[text.index("Decode t/s") : text.index("Signed result")]
    assert max(len(line) for line in table_part.splitlines()) <= 80, table_part


def test_the_method_page_quotes_the_worlds_the_simulation_runs() -> None:
    """docs/method.md's table comes from `python -m bench.stopping` (300 sweeps a world, seed 44): one row a
    world, at the spread and process time the simulation uses."""
    from bench import stopping

    page = (Path(__file__).parents[2] / "docs" / "method.md").read_text()
    for world in stopping.WORLDS:
        if world.round_sigma:
            assert f"plus {world.round_sigma * 100:.2f}% shared by a round's processes" in page, world
        else:
            assert f"({world.sigma * 100:.2f}%, {world.process_s:g} s)" in page, world
    assert f"cap {rounds.MAX_ROUNDS}" in page


def test_the_newcomers_cpu_run_renders_in_80_columns_and_never_prints_a_change_alone() -> None:
    """The recorded CPU run of fixtures/newcomer-cpu/: one cycle under heavy load, intervals past +1000%."""
    from benchhub_agent.cli import _markdown

    recorded = json.loads((Path(__file__).parent / "fixtures" / "newcomer-cpu" / "payload.json").read_text())
    text = report.table(recorded)
    assert max(len(line) for line in text.splitlines()) <= 80, text
    assert "[<-90%, >+900%]" in text and "stopped: time" in text
    # A long machine name (a CI machine's CPU printed a 90-column heading) wraps like the rest.
    recorded["machine"]["chip"] = "Intel(R) Xeon(R) Processor @ 2.60GHz with a name longer than most"
    text = report.table(recorded)
    assert max(len(line) for line in text.splitlines()) <= 80, text
    assert "on Intel(R) Xeon(R) Processor @ 2.60GHz" in text and "\n  " in text
    rows = [line for line in _markdown(recorded, None).splitlines() if line.startswith("| 01")]
    assert rows and all(cell.strip().endswith("unclear") for row in rows for cell in row.split("|")[4:-1])


def test_the_quoted_spreads_of_the_device_runs_come_from_their_payloads() -> None:
    """The A/A runs' noise as docs/method.md and the agent README quote it: raw (variants removed) and the
    residual the rule uses (rounds and positions removed too), the median over batch sizes."""
    from bench import stopping

    root = Path(__file__).parents[2]
    fixtures = Path(__file__).parent / "fixtures" / "noise-by-size"
    quoted = [(root / "docs" / "method.md").read_text(), (root / "agent" / "README.md").read_text()]
    for name, raw, residual in (("aa-run1", "1.11%", "1.07%"), ("aa-run2", "1.37%", "0.87%")):
        payload = json.loads((fixtures / f"{name}-payload.json").read_text())
        found = stopping.measured_spreads(payload)
        assert (f"{found[0]:.2%}", f"{found[1]:.2%}") == (raw, residual), name
        for page in quoted:
            assert raw in page and residual in page


def test_the_eta_never_claims_less_than_the_rest_of_the_cycle_the_sweep_must_finish() -> None:
    """A cycle once started always ends: past the budget, mid-cycle, the ETA is the rest of that cycle, not 0."""
    from benchhub_agent.sweep import eta_text

    assert eta_text(0, None, None, 240.0) == "ETA up to 4 min"  # nothing measured yet: the budget
    assert eta_text(0, None, None, -300.0, cycle_rest=600.0) == "ETA 10 min"  # 4-minute budget spent, 1 cycle
    assert eta_text(0, None, None, 600.0, cycle_rest=120.0) == "ETA 2-10 min"  # this cycle, at most the budget
    # cycle 3 of an expected 8-15, a 50 s cycle half done: 25 s + 5 to 12 more cycles, capped by the budget
    assert eta_text(2, (8, 15), 50.0, 1000.0, cycle_rest=25.0) == "ETA 5-10 min"
    assert eta_text(2, (8, 15), 50.0, 100.0, cycle_rest=25.0) == "ETA 2 min"


def test_the_newcomers_table_shows_the_numbers_of_the_sites_page_for_the_upload() -> None:
    """fixtures/newcomer-cpu/site-run-*: a CPU run uploaded to a local site, and the rows of the site's page for
    it (variant, batch, each rep, the median over paired rounds, rounds, the change). The agent's table now
    renders that payload with the page's t/s and change, and fits 80 columns."""
    folder = Path(__file__).parent / "fixtures" / "newcomer-cpu"
    recorded = json.loads((folder / "site-run-payload.json").read_text())
    page = {}
    for line in (folder / "site-run-page.txt").read_text().splitlines()[1:]:
        variant, batch, *_, median, _rounds, change, _excluded1, _excluded2, _excluded3 = line.split(" ")
        page[(variant, int(batch))] = (median, change.replace("−", "-"))
    table = report.table(recorded)
    assert max(len(line) for line in table.splitlines()) <= 80, table
    for cell in report.cells(recorded):
        median, change = page[(cell["variant"], cell["batch_size"])]
        assert f"{cell['tg_tps']:.1f}" == median
        base = page[("upstream", cell["batch_size"])][0]
        assert f"{cell['baseline_tg_tps']:.1f}" == base
        if cell["variant"] != "upstream":
            assert f"{(cell['speedup'] - 1) * 100:+.0f}%" == change
            assert f"{base} {median} " in " ".join(table.split())
