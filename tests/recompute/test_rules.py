"""The standalone recompute (scripts/recompute_cells.py) against hand-computed cells: every rule of
cells v3 (docs/protocol.md section 7), without a server; its statistics against the service's own."""

from __future__ import annotations

import ast
import random
import sys
from dataclasses import asdict
from datetime import timedelta
from typing import Any

import pytest
from benchhub_protocol import stats

from tests.recompute.builder import (
    GENERATED,
    SCRIPT,
    VEC_ENV,
    SnapshotBuilder,
    excluded,
    load_script,
    payload,
    ratio_tg,
)

rc = load_script()


def test_the_script_imports_only_the_standard_library_and_pynacl() -> None:
    tree = ast.parse(SCRIPT.read_text())
    roots = {
        alias.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names
    }
    roots |= {node.module.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module}
    assert roots - set(sys.stdlib_module_names) == {"nacl"}


# ------------------------------------------------------------------ statistics: the service's, written again


def random_page(rng: random.Random) -> dict[tuple[str, str, int], list[Any]]:
    page: dict[tuple[str, str, int], list[Any]] = {}
    for variant, commit in (("upstream", "a"), ("01", "a"), ("01", "b")):
        for batch in (1, 2, 4, 8):
            effect = 1.0 if variant == "upstream" else rng.choice([0.97, 1.0, 1.01, 1.1])
            page[variant, commit, batch] = [
                (
                    f"key{rng.randrange(8)}",
                    f"handle{rng.randrange(4)}",
                    effect * rng.lognormvariate(0, 0.02),
                    rng.uniform(50, 150),
                    rng.choice([0.0, 0.003, 0.02 * rng.random()]),
                    *rng.choice([(1, 1), (2, 1), (1, 2), (4, 5)]),
                )
                for _ in range(rng.choice([0, 1, 2, 3, 5, 12]))
            ]
    return page


def test_page_stats_gives_the_services_numbers_field_for_field() -> None:
    rng = random.Random(5)
    for _ in range(200):
        page = random_page(rng)
        sizes, min_effect = rng.choice([[2, 4, 8], [2], []]), rng.choice([0.02, 0.005])
        ours = rc.page_stats(
            {k: [rc.Measured(*r) for r in v] for k, v in page.items()}, headline_sizes=sizes, min_effect=min_effect
        )
        theirs = stats.page_stats(
            {k: [stats.Row(*r) for r in v] for k, v in page.items()}, headline_sizes=sizes, min_effect=min_effect
        )
        assert ours.cells.keys() == theirs.cells.keys() and ours.headlines.keys() == theirs.headlines.keys()
        for mine, live in [
            *zip(ours.cells.values(), theirs.cells.values(), strict=True),
            *zip(ours.headlines.values(), theirs.headlines.values(), strict=True),
        ]:
            for name, value in asdict(live).items():
                assert rc.same("speedup" if isinstance(value, float) else name, getattr(mine, name), value), name


# ------------------------------------------------------------------ a machine is a key


def test_a_machine_is_a_key_whatever_hardware_it_claims() -> None:
    snap = SnapshotBuilder()
    snap.add("ada", payload(ratio_tg(1.0, base=100)))
    snap.add("ada", payload(ratio_tg(1.4, base=120), memory=2**36))  # same key, other memory: same machine
    snap.add("ada", payload(ratio_tg(2.0, base=50)), key="ada-machine-1")  # ada's second machine
    snap.add("bob", payload(ratio_tg(1.1, base=80)))
    cell = snap.cell()
    # machine values: the mean of logs of 1.0 and 1.4, 2.0, 1.1; their spread dwarfs their noise, so the
    # machines weigh alike; baselines: the geometric means of 100 and 120, 50, 80
    assert cell["speedup"] == pytest.approx((1.4**0.5 * 2.0 * 1.1) ** (1 / 3), rel=1e-3)
    assert cell["baseline_tg_tps"] == pytest.approx((12000**0.5 * 50 * 80) ** (1 / 3), rel=1e-12)
    assert cell["tg_tps"] == pytest.approx(cell["baseline_tg_tps"] * cell["speedup"], rel=1e-12)
    assert (cell["n_machines"], cell["n_submissions"], cell["n_contributors"]) == (3, 4, 2)
    assert cell["interval"] == "95%, page-wise" and cell["predict_level"] == 0.8
    assert cell["ci_low"] < cell["speedup"] < cell["ci_high"]
    assert cell["predict_low"] < cell["speedup"] < cell["predict_high"]


def test_chip_gpu_cores_model_file_backend_and_commit_are_separate_cells() -> None:
    snap = SnapshotBuilder()
    snap.add("ada", payload(ratio_tg(1.1)))
    snap.add("bob", payload(ratio_tg(1.3), machine={"gpu_cores": 16}))
    snap.add("cole", payload(ratio_tg(1.5), model={"sha256": "e" * 64}))  # same quant and label, another file
    snap.add("dina", payload(ratio_tg(1.7), machine={"backend": "cpu"}))
    other_commit = payload(ratio_tg(1.9))
    other_commit["variants"][1]["commit"] = "9" * 40
    snap.add("eve", other_commit)
    rows = [row for row in snap.boards()["mv-ext-iquants"] if row["variant"] == "01"]
    found = {
        (row["gpu_cores"], row["model_sha256"][0], row["backend"], row["commit"][0]): row["speedup"] for row in rows
    }
    assert found == {
        (20, "b", "metal", "0"): pytest.approx(1.1),
        (16, "b", "metal", "0"): pytest.approx(1.3),
        (20, "e", "metal", "0"): pytest.approx(1.5),
        (20, "b", "cpu", "0"): pytest.approx(1.7),
        (20, "b", "metal", "9"): pytest.approx(1.9),
    }
    assert {(row["model"], row["quant"]) for row in rows} == {("Qwen3-1.7B UD-IQ2_XXS", "IQ2_XXS")}


def test_a_backend_the_patches_do_not_touch_is_a_control_and_min_effect_is_the_campaigns() -> None:
    snap = SnapshotBuilder()
    snap.rules = {**snap.rules, "min_effect": 0.05}
    snap.add("ada", payload(ratio_tg(1.1)))
    snap.add("bob", payload(ratio_tg(1.1), machine={"backend": "cuda", "gpu_cores": None}))
    controls = {row["backend"]: row["control"] for row in snap.boards()["mv-ext-iquants"]}
    assert controls == {"metal": False, "cuda": True}
    assert {row["min_effect"] for row in snap.boards()["mv-ext-iquants"]} == {0.05}


def test_a_key_on_probation_is_pending_not_counted() -> None:
    snap = SnapshotBuilder()
    snap.probation_s = 3600
    snap.add("ada", payload(ratio_tg(1.2)))
    snap.add("bob", payload(ratio_tg(1.3)))
    snap.add("bob", payload(ratio_tg(1.4)))
    snap.add("cole", payload(ratio_tg(1.5), correctness={"01": "fail"}))  # a reason comes before probation
    snap.registered = {"bob": GENERATED - timedelta(seconds=3599), "cole": GENERATED}
    cell = snap.cell()
    assert (cell["n_machines"], cell["n_pending"], cell["speedup"]) == (1, 1, pytest.approx(1.2))
    assert cell["excluded"] == excluded(correctness_failed=1)
    snap.registered["bob"] = GENERATED - timedelta(seconds=3600)  # exactly past it: counted
    assert (snap.cell()["n_machines"], snap.cell()["n_pending"]) == (2, 0)
    snap.probation_s = 0
    assert snap.cell()["n_pending"] == 0


# ------------------------------------------------------------------ rounds


def test_the_ratio_is_over_whole_cycles_not_the_ratio_of_medians() -> None:
    snap = SnapshotBuilder()
    snap.add("ada", payload({"upstream": {1: [100, 200, 100]}, "01": {1: [150, 220, 90]}}))
    cell = snap.cell()
    # rounds 1 and 2 are a whole cycle (A B, B A): 150/100 and 220/200, their geometric mean; round 3
    # starts a cycle it never finishes. Medians 150 / 100 would say 1.5.
    assert cell["speedup"] == pytest.approx((1.5 * 1.1) ** 0.5)
    assert cell["baseline_tg_tps"] == pytest.approx(100, rel=1e-12)
    assert cell["tg_tps"] == pytest.approx(100 * (1.5 * 1.1) ** 0.5)
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
    # one whole cycle, rounds 1.2 and 1.3; 500 is unpaired, and bob's one paired round makes no cycle
    assert (cell["speedup"], cell["n_submissions"]) == (pytest.approx((1.2 * 1.3) ** 0.5), 1)
    assert snap.cell("01", 4)["n_machines"] == 2
    assert snap.cell("upstream", 1)["n_machines"] == 2


# ------------------------------------------------------------------ exclusions and states


def test_each_exclusion_reason_counts_once_the_first_that_applies() -> None:
    snap = SnapshotBuilder()
    snap.add("ada", payload(ratio_tg(1.2)))  # counted
    snap.add("bob", payload(ratio_tg(1.3), correctness={"01": "fail"}), state="hidden", reason="spam")
    snap.add("mo", payload(ratio_tg(1.3), correctness={"01": "fail"}), state="withdrawn")
    snap.add("ned", payload(ratio_tg(1.3), correctness={"01": "fail"}), state="held", reason="quarantined")
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
        hidden=1, withdrawn=1, held=1, correctness_failed=2, correctness_not_run=2, degenerate_output=1, run_state=4
    )
    assert (cell["n_submissions"], cell["speedup"]) == (2, pytest.approx((1.2 * 1.05) ** 0.5))  # geometric mean
    # The baseline's own rows: its correctness passed everywhere and it is never "degenerate".
    baseline = snap.cell("upstream")
    assert baseline["excluded"] == excluded(hidden=1, withdrawn=1, held=1, run_state=6)
    assert baseline["n_submissions"] == 5


@pytest.mark.parametrize(
    ("state", "status", "loops", "flags", "expected"),
    [
        ("hidden", "fail", True, ["on_battery"], "hidden"),
        ("withdrawn", "fail", True, ["on_battery"], "withdrawn"),
        ("held", "fail", True, ["on_battery"], "held"),
        ("counted", "fail", True, ["on_battery"], "correctness_failed"),
        ("counted", "not_run", True, ["on_battery"], "correctness_not_run"),
        ("counted", "pass", True, ["on_battery"], "degenerate_output"),
        ("counted", "pass", False, ["on_battery"], "run_state"),
        ("counted", "pass", False, ["high_spread"], None),
    ],
)
def test_exclusion_order(state: str, status: str, loops: bool, flags: list[str], expected: str | None) -> None:
    body = payload(ratio_tg(1.1), correctness={"01": status}, degenerate={"01": loops}, flags=flags)
    submission = rc.Submission("id", "ada", "keyid", GENERATED, state, body)
    assert rc.exclusion(submission, "01", "upstream") == expected


def test_an_excluded_only_cell_exists_with_no_numbers() -> None:
    snap = SnapshotBuilder()
    snap.add("ada", payload(ratio_tg(1.2)), state="hidden", reason="hidden by a moderator: spam")
    snap.add("bob", payload(ratio_tg(1.2, batch=4)), state="withdrawn")
    rows = snap.boards()["mv-ext-iquants"]
    assert {(row["variant"], row["batch_size"]) for row in rows} == {
        ("upstream", 1),
        ("01", 1),
        ("upstream", 4),
        ("01", 4),
    }
    cell = snap.cell()
    assert cell == {
        "chip": "Apple M5 Pro",
        "gpu_cores": 20,
        "model": "Qwen3-1.7B UD-IQ2_XXS",
        "model_sha256": "b" * 64,
        "quant": "IQ2_XXS",
        "variant": "01",
        "commit": "0c1e57098bba43ac29e6e3b677cdceebdd22334f",
        "batch_size": 1,
        "baseline_tg_tps": None,
        "tg_tps": None,
        "speedup": None,
        "interval": None,
        "ci_low": None,
        "ci_high": None,
        "predict_low": None,
        "predict_high": None,
        "predict_level": None,
        "tau": None,
        "i2": None,
        "verdict": "too few machines",
        "min_effect": 0.02,
        "campaign_version": 1,
        "superseded": False,
        "n_machines": 0,
        "n_submissions": 0,
        "n_contributors": 0,
        "n_pending": 0,
        "excluded": excluded(hidden=1),
        "backend": "metal",
        "control": False,
    }
    assert snap.cell(batch=4)["excluded"] == excluded(withdrawn=1)


def test_the_label_comes_from_the_earliest_submission_the_cell_counts_else_the_earliest_row() -> None:
    snap = SnapshotBuilder()
    snap.add("ada", payload({"upstream": {1: [100]}, "01": {1: [120]}}, model={"label": "one round"}))  # nonstandard
    snap.add("bob", payload(ratio_tg(1.2), model={"label": "first"}), state="held")
    assert (snap.cell()["model"], snap.cell()["quant"]) == ("first", "IQ2_XXS")  # nothing counted: the earliest row
    snap.add("cole", payload(ratio_tg(1.2), model={"label": "second", "file_type": "Q8_0"}))
    snap.add("dina", payload(ratio_tg(1.2), model={"label": "third"}))
    cell = snap.cell()
    assert (cell["model"], cell["quant"]) == ("second", "Q8_0")  # the standing claim, not the held one
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


# ------------------------------------------------------------------ invariants


def test_invariants_over_random_submissions() -> None:
    rng = random.Random(23)
    snap = SnapshotBuilder()
    for _ in range(60):
        handle = rng.choice(["ada", "bob", "cole", "dina"])
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
        state = rng.choice(["counted"] * 8 + ["hidden", "withdrawn", "held"])
        snap.add(handle, body, state=state, key=rng.choice([None, f"{handle}-machine-1"]))
    rows = snap.boards()["mv-ext-iquants"]
    assert len(rows) == 8  # 2 models x 2 variants x 2 batch sizes
    for row in rows:
        n = row["n_machines"]
        assert row["n_contributors"] <= n <= row["n_submissions"]
        assert row["interval"] == ("95%, page-wise" if n >= 3 else None)
        if n == 0:
            assert row["speedup"] is row["tg_tps"] is row["baseline_tg_tps"] is None
            continue
        assert row["tg_tps"] == pytest.approx(row["baseline_tg_tps"] * row["speedup"], rel=1e-12)
        if row["interval"]:
            assert row["ci_low"] <= row["speedup"] <= row["ci_high"]
        if row["variant"] == "upstream":
            assert row["speedup"] == 1.0 and row["excluded"]["degenerate_output"] == 0


def test_the_statistics_section_has_the_services_constants() -> None:
    for name in ("VERDICTS", "CONFIDENCE", "INTERVAL_LABEL", "PREDICT_LEVEL", "MIN_MACHINES", "EFFECT_FLOOR"):
        assert getattr(rc, name) == getattr(stats, name), name
