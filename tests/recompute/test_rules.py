"""The standalone recompute (scripts/recompute_cells.py) against hand-computed cells: every rule of
cells v2 (docs/protocol.md section 7, settled by the lead's cells-v2 page), without a server."""

from __future__ import annotations

import ast
import math
import random
import sys
from typing import Any

import pytest

from tests.recompute.builder import SCRIPT, VEC_ENV, SnapshotBuilder, excluded, load_script, payload, ratio_tg

rc = load_script()


def test_the_script_imports_only_the_standard_library_and_pynacl() -> None:
    tree = ast.parse(SCRIPT.read_text())
    roots = {
        alias.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names
    }
    roots |= {node.module.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module}
    assert roots - set(sys.stdlib_module_names) == {"nacl"}


# ------------------------------------------------------------------ statistics


def brute_force_rank(n: int) -> int:
    """k straight from the definition, with exact fractions of 2**n."""
    ks = [k for k in range(1, n // 2 + 1) if 2 * sum(math.comb(n, i) for i in range(k)) / 2**n <= 0.05]
    return max(ks, default=0)


@pytest.mark.parametrize(("n", "k"), [(1, 0), (2, 0), (5, 0), (6, 1), (7, 1), (8, 1), (9, 2), (10, 2), (20, 6)])
def test_interval_rank_by_hand(n: int, k: int) -> None:
    # n=6: 2*C(6,0)/64 = 0.031 <= 0.05, 2*(1+6)/64 = 0.22 > 0.05 -> k=1.
    # n=9: 2*(1+9)/512 = 0.039 <= 0.05, 2*(1+9+36)/512 = 0.18 > 0.05 -> k=2.
    # n=20: 2*(1+20+190+1140+4845+15504)/2**20 = 0.041, adding C(20,6)=38760 gives 0.115 -> k=6.
    assert rc.interval_rank(n) == k


def test_interval_rank_matches_the_definition_up_to_300() -> None:
    assert [rc.interval_rank(n) for n in range(1, 301)] == [brute_force_rank(n) for n in range(1, 301)]


def test_median_of_an_even_count_is_the_mean_of_the_middle_two() -> None:
    assert rc.median([4.0, 1.0, 3.0, 2.0]) == 2.5
    assert rc.median([3.0, 1.0, 2.0]) == 2.0


@pytest.mark.parametrize(
    ("interval", "low", "high", "expected"),
    [
        ("95%", 1.01, 1.5, "faster"),
        ("95%", 0.5, 0.99, "slower"),
        ("95%", 0.9, 1.1, "no clear change"),
        ("95%", 1.0, 1.2, "no clear change"),  # holds 1 at its edge
        ("95%", 0.8, 1.0, "no clear change"),
        ("range", 1.2, 1.5, "too few machines"),
        (None, None, None, "too few machines"),
    ],
)
def test_verdict(interval: str | None, low: float | None, high: float | None, expected: str) -> None:
    assert rc.verdict(interval, low, high) == expected


# ------------------------------------------------------------------ the machine is the unit


def test_five_submissions_of_one_machine_count_once() -> None:
    snap = SnapshotBuilder()
    for _ in range(5):
        snap.add("ada", payload(ratio_tg(2.0, base=100)))
    snap.add("bob", payload(ratio_tg(1.1, base=50)))
    snap.add("cole", payload(ratio_tg(1.2, base=80)))
    cell = snap.cell("01", 1)
    # machine values 2.0, 1.1, 1.2 -> 1.2 (over submissions it would be 2.0); baselines 100, 50, 80 -> 80.
    assert cell["speedup"] == pytest.approx(1.2, rel=1e-12)
    assert cell["baseline_tg_tps"] == 80
    assert cell["tg_tps"] == pytest.approx(96, rel=1e-12)
    assert (cell["interval"], cell["ci_low"], cell["ci_high"]) == ("range", pytest.approx(1.1), pytest.approx(2.0))
    assert (cell["n_machines"], cell["n_submissions"], cell["n_contributors"]) == (3, 7, 3)
    assert cell["verdict"] == "too few machines"
    assert cell["excluded"] == excluded()
    baseline = snap.cell("upstream", 1)
    assert (baseline["speedup"], baseline["tg_tps"], baseline["n_machines"]) == (1.0, 80, 3)


def test_a_machine_is_contributor_chip_gpu_cores_and_memory() -> None:
    snap = SnapshotBuilder()
    snap.add("ada", payload(ratio_tg(1.0)))
    snap.add("ada", payload(ratio_tg(1.4)))  # same machine: its value is the median 1.2
    snap.add("ada", payload(ratio_tg(2.0), memory=2**36))  # another machine of ada's
    snap.add("bob", payload(ratio_tg(1.1)))
    cell = snap.cell()
    # machine values 1.2, 2.0, 1.1 -> 1.2
    assert cell["speedup"] == pytest.approx(1.2)
    assert (cell["n_machines"], cell["n_submissions"], cell["n_contributors"]) == (3, 4, 2)
    two = SnapshotBuilder()
    two.add("ada", payload(ratio_tg(1.0)))
    two.add("bob", payload(ratio_tg(1.5)))
    assert two.cell()["speedup"] == pytest.approx(1.25)  # an even count of machines: the mean of the middle two


def test_chip_gpu_cores_and_model_file_are_separate_cells() -> None:
    snap = SnapshotBuilder()
    snap.add("ada", payload(ratio_tg(1.1)))
    snap.add("bob", payload(ratio_tg(1.3), machine={"gpu_cores": 16}))
    snap.add("cole", payload(ratio_tg(1.5), model={"sha256": "e" * 64}))  # same quant, another file
    rows = [row for row in snap.boards()["mv-ext-iquants"] if row["variant"] == "01"]
    found = {(row["gpu_cores"], row["model_sha256"][:1]): row["speedup"] for row in rows}
    assert found == {(20, "b"): pytest.approx(1.1), (16, "b"): pytest.approx(1.3), (20, "e"): pytest.approx(1.5)}
    assert {row["quant"] for row in rows} == {"IQ2_XXS"}


# ------------------------------------------------------------------ rounds


def test_the_ratio_is_the_median_of_round_ratios_not_the_ratio_of_medians() -> None:
    snap = SnapshotBuilder()
    snap.add("ada", payload({"upstream": {1: [100, 200, 100]}, "01": {1: [150, 220, 90]}}))
    cell = snap.cell()
    # rounds: 150/100 = 1.5, 220/200 = 1.1, 90/100 = 0.9 -> 1.1; medians 150 / 100 would say 1.5.
    assert cell["speedup"] == pytest.approx(1.1)
    assert cell["baseline_tg_tps"] == 100
    assert cell["tg_tps"] == pytest.approx(110)
    assert (cell["interval"], cell["ci_low"], cell["ci_high"], cell["n_machines"]) == (None, None, None, 1)


def test_fewer_than_two_rounds_count_nowhere() -> None:
    snap = SnapshotBuilder()
    snap.add("ada", payload({"upstream": {1: [100]}, "01": {1: [300]}}))  # one round: nonstandard
    assert snap.boards()["mv-ext-iquants"] == []
    snap.add("bob", payload(ratio_tg(1.2)))
    cell = snap.cell()
    assert (cell["speedup"], cell["n_submissions"], cell["excluded"]) == (pytest.approx(1.2), 1, excluded())


def test_a_row_needs_two_paired_rounds_and_a_failed_run_keeps_its_rows() -> None:
    body = payload({"upstream": {1: [100, 100, 100], 4: [50, 50, 50]}, "01": {1: [120, 130, 500], 4: [60, 60, 60]}})
    runs = body["sweep"]["runs"]
    for run in runs:
        if run["rep"] == 3 and run["variant"] == "upstream":
            run["rows"] = [row for row in run["rows"] if row["batch_size"] == 4]  # b=1 unpaired in round 3
        if run["rep"] == 2 and run["variant"] == "01":
            run["exit_code"] = 1  # crashed after writing its rows: they still count
    single = payload({"upstream": {1: [100, 100], 4: [50, 50]}, "01": {1: [120, 130], 4: [60, 60]}})
    for run in single["sweep"]["runs"]:
        if run["rep"] == 2 and run["variant"] == "01":
            run["rows"] = [row for row in run["rows"] if row["batch_size"] == 4]  # b=1 paired once only
    snap = SnapshotBuilder()
    snap.add("ada", body)
    snap.add("bob", single)
    cell = snap.cell("01", 1)
    assert (cell["speedup"], cell["n_submissions"]) == (pytest.approx(1.25), 1)  # rounds 1.2 and 1.3; 500 unpaired
    assert snap.cell("01", 4)["n_machines"] == 2
    assert snap.cell("upstream", 1)["n_machines"] == 2


# ------------------------------------------------------------------ exclusions and states


def test_each_exclusion_reason_counts_once_the_first_that_applies() -> None:
    snap = SnapshotBuilder()
    snap.add("ada", payload(ratio_tg(1.2)))  # counted
    snap.add("bob", payload(ratio_tg(1.3), correctness={"01": "fail"}), state="hidden", reason="quarantined")
    snap.add("cole", payload(ratio_tg(1.3), correctness={"01": "fail"}, degenerate={"01": True}))
    both = payload(ratio_tg(1.3))
    entry = next(entry for entry in both["correctness"] if entry["variant"] == "01")
    both["correctness"].append({**entry, "backend": "BLAS", "status": "fail"})  # a pass and a fail: failed
    snap.add("dina", both)
    snap.add("eve", payload(ratio_tg(1.3), correctness={"01": "not_run"}, flags=["on_battery"]))
    missing = payload(ratio_tg(1.3))
    missing["correctness"] = [entry for entry in missing["correctness"] if entry["variant"] != "01"]
    snap.add("fay", missing)
    snap.add("gus", payload(ratio_tg(1.3), degenerate={"01": True}, flags=["thermal_pressure"]))
    snap.add("hal", payload(ratio_tg(1.05), degenerate={"01": True, "upstream": True}))  # both loop: counted
    snap.add("ivy", payload(ratio_tg(1.3), flags=["low_power_mode"]))
    snap.add("jo", payload(ratio_tg(1.3), machine={"power_source": "battery"}))
    snap.add("kit", payload(ratio_tg(1.3), machine={"thermal": "pressure"}))
    snap.add("lee", payload(ratio_tg(1.3), machine={"low_power_mode": True}))
    cell = snap.cell()
    assert cell["excluded"] == excluded(
        hidden=1, correctness_failed=2, correctness_not_run=2, degenerate_output=1, run_state=4
    )
    assert (cell["n_submissions"], cell["speedup"]) == (2, pytest.approx(1.125))
    # The baseline's own rows: its correctness passed everywhere and it is never "degenerate".
    baseline = snap.cell("upstream")
    assert baseline["excluded"] == excluded(hidden=1, run_state=6)
    assert baseline["n_submissions"] == 5


@pytest.mark.parametrize(
    ("state", "status", "loops", "flags", "expected"),
    [
        ("hidden", "fail", True, ["on_battery"], "hidden"),
        ("counted", "fail", True, ["on_battery"], "correctness_failed"),
        ("counted", "not_run", True, ["on_battery"], "correctness_not_run"),
        ("counted", "pass", True, ["on_battery"], "degenerate_output"),
        ("counted", "pass", False, ["on_battery"], "run_state"),
        ("counted", "pass", False, ["high_spread"], None),
    ],
)
def test_exclusion_order(state: str, status: str, loops: bool, flags: list[str], expected: str | None) -> None:
    body = payload(ratio_tg(1.1), correctness={"01": status}, degenerate={"01": loops}, flags=flags)
    submission = rc.Submission("id", "ada", None, state, body)
    assert rc.exclusion(submission, "01", "upstream") == expected


def test_a_hidden_only_cell_exists_with_no_numbers_and_withdrawn_is_nowhere() -> None:
    snap = SnapshotBuilder()
    snap.add("ada", payload(ratio_tg(1.2)), state="hidden", reason="hidden by a moderator: spam")
    snap.add("bob", payload(ratio_tg(1.2, batch=4)), state="withdrawn")
    rows = snap.boards()["mv-ext-iquants"]
    assert {(row["variant"], row["batch_size"]) for row in rows} == {("upstream", 1), ("01", 1)}
    cell = snap.cell()
    assert cell == {
        "chip": "Apple M5 Pro",
        "gpu_cores": 20,
        "model": "Qwen3-1.7B UD-IQ2_XXS",
        "model_sha256": "b" * 64,
        "quant": "IQ2_XXS",
        "variant": "01",
        "batch_size": 1,
        "baseline_tg_tps": None,
        "tg_tps": None,
        "speedup": None,
        "interval": None,
        "ci_low": None,
        "ci_high": None,
        "verdict": "too few machines",
        "n_machines": 0,
        "n_submissions": 0,
        "n_contributors": 0,
        "excluded": excluded(hidden=1),
    }


def test_the_label_comes_from_the_earliest_submission_with_a_row_in_the_cell() -> None:
    snap = SnapshotBuilder()
    snap.add("ada", payload({"upstream": {1: [100]}, "01": {1: [120]}}, model={"label": "one round"}))  # nonstandard
    snap.add("bob", payload(ratio_tg(1.2), model={"label": "first"}), state="hidden")
    snap.add("cole", payload(ratio_tg(1.2), model={"label": "second", "file_type": "Q8_0"}))
    cell = snap.cell()
    assert (cell["model"], cell["quant"]) == ("first", "IQ2_XXS")
    unlabelled = payload(ratio_tg(1.2))
    del unlabelled["model"]["label"]
    other = SnapshotBuilder()
    other.add("ada", unlabelled)
    assert other.cell()["model"] == "Qwen3-1.7B-UD-IQ2_XXS.gguf"


# ------------------------------------------------------------------ nonstandard sweeps and envs


def _vec(env: dict[str, str]) -> dict[str, Any]:
    body = payload({"upstream": {1: [100, 100]}, "01+02": {1: [130, 130]}})
    body["variants"][1]["env"] = env
    return body


@pytest.mark.parametrize(
    "change",
    [
        lambda body: body["sweep"].update(npp=256),
        lambda body: body["sweep"].update(flash_attn=False),
        lambda body: body["sweep"].update(extra_args=["-pps"]),
        lambda body: body["sweep"]["batch_sizes"].append(7),
        lambda body: body["variants"][1]["env"].pop("GGML_METAL_MV_IQ2_S_VEC"),
        lambda body: body["variants"][0]["env"].update(GGML_METAL_EXTRA="1"),
    ],
    ids=["npp", "flash_attn", "extra_args", "batch_size", "variant_env", "baseline_env"],
)
def test_a_nonstandard_submission_counts_nowhere(change: Any) -> None:
    snap = SnapshotBuilder()
    snap.add("ada", _vec(dict(VEC_ENV)))
    odd = _vec(dict(VEC_ENV))
    change(odd)
    snap.add("bob", odd, state="hidden")  # nonstandard first: not even counted as hidden
    cell = snap.cell("01+02")
    assert (cell["n_submissions"], cell["excluded"]) == (1, excluded())
    assert cell["speedup"] == pytest.approx(1.3)


def test_what_is_not_a_sweep_difference() -> None:
    snap = SnapshotBuilder()
    body = _vec(dict(VEC_ENV))  # batch sizes [1]: a subset; n_ctx 4096: the campaign pins none
    body["sweep"]["extra_args"] = []
    snap.add("ada", body)
    assert snap.cell("01+02")["n_submissions"] == 1
    missing_env = SnapshotBuilder()
    missing_env.add("ada", _vec({}))  # the campaign's env not applied
    assert missing_env.boards()["mv-ext-iquants"] == []


# ------------------------------------------------------------------ intervals from six machines


@pytest.mark.parametrize(
    ("ratios", "interval", "low", "high", "speedup", "verdict"),
    [
        ([0.8, 0.9, 1.05, 1.1, 1.2, 1.3], "95%", 0.8, 1.3, 1.075, "no clear change"),  # n=6, k=1
        ([1.01, 1.02, 1.05, 1.1, 1.2, 1.3, 1.4], "95%", 1.01, 1.4, 1.1, "faster"),  # n=7, k=1
        ([0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.97, 0.99], "95%", 0.5, 0.99, 0.85, "slower"),  # n=8, k=1
        ([0.95, 1.02, 1.05, 1.1, 1.1, 1.2, 1.3, 1.4, 1.6], "95%", 1.02, 1.4, 1.1, "faster"),  # n=9, k=2
        ([0.5, 0.6, 0.9, 1.0, 1.1, 1.2, 1.3, 1.4, 1.5, 1.6], "95%", 0.6, 1.5, 1.15, "no clear change"),  # n=10, k=2
        ([0.9, 1.1, 1.2, 1.3, 1.4], "range", 0.9, 1.4, 1.2, "too few machines"),
    ],
)
def test_order_statistic_intervals(
    ratios: list[float], interval: str, low: float, high: float, speedup: float, verdict: str
) -> None:
    snap = SnapshotBuilder()
    for index, ratio in enumerate(ratios):
        snap.add(f"m{index}", payload(ratio_tg(ratio)))
    cell = snap.cell()
    assert cell["n_machines"] == len(ratios)
    assert (cell["interval"], cell["verdict"]) == (interval, verdict)
    assert (cell["ci_low"], cell["ci_high"]) == (pytest.approx(low), pytest.approx(high))
    assert cell["speedup"] == pytest.approx(speedup)


def test_invariants_over_random_submissions() -> None:
    rng = random.Random(23)
    snap = SnapshotBuilder()
    for _ in range(60):
        handle = rng.choice(["ada", "bob", "cole", "dina", "eve", "fay", "gus", "hal"])
        reps = rng.choice([1, 2, 2, 3, 4])
        tg = {
            "upstream": {b: [rng.uniform(50, 150) for _ in range(reps)] for b in (1, 4)},
            "01": {b: [rng.uniform(50, 200) for _ in range(reps)] for b in (1, 4)},
        }
        body = payload(
            tg,
            memory=rng.choice([2**34, 2**35]),
            correctness={"01": rng.choice(["pass", "pass", "pass", "fail", "not_run"])},
            degenerate={"01": rng.random() < 0.1},
            flags=["on_battery"] if rng.random() < 0.1 else [],
            model={"sha256": rng.choice("bc") * 64},
        )
        snap.add(handle, body, state=rng.choice(["counted"] * 8 + ["hidden", "withdrawn"]))
    rows = snap.boards()["mv-ext-iquants"]
    assert len(rows) == 8  # 2 models x 2 variants x 2 batch sizes
    for row in rows:
        n = row["n_machines"]
        assert row["n_contributors"] <= n <= row["n_submissions"]
        assert row["interval"] == ("95%" if n >= 6 else "range" if n >= 2 else None)
        if n == 0:
            assert row["speedup"] is row["tg_tps"] is row["baseline_tg_tps"] is None
            continue
        assert row["tg_tps"] == pytest.approx(row["baseline_tg_tps"] * row["speedup"], rel=1e-12)
        if row["interval"]:
            assert row["ci_low"] <= row["speedup"] <= row["ci_high"]
        if row["variant"] == "upstream":
            assert row["speedup"] == 1.0 and row["excluded"]["degenerate_output"] == 0
