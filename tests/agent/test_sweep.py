from __future__ import annotations

import stat
from pathlib import Path

from benchhub_agent import sweep
from benchhub_agent.report import cells, table
from benchhub_agent.sweep import SweepSettings

REFERENCE = Path(__file__).parent / "fixtures" / "cpu"


def replaying_tool(folder: Path, stdout: Path, exit_code: int) -> Path:
    """A stand-in llama-batched-bench that replays a real recorded output and exit status."""
    folder.mkdir(parents=True)
    tool = folder / "llama-batched-bench"
    tool.write_text(f"#!/bin/sh\ncat '{stdout}'\nexit {exit_code}\n")
    tool.chmod(tool.stat().st_mode | stat.S_IXUSR)
    return folder


def settings(reps: int = 2, max_reps: int = 2, batch_sizes: tuple[int, ...] = (1, 2, 4)) -> SweepSettings:
    return SweepSettings(
        npp=128, ntg=32, batch_sizes=batch_sizes, reps=reps, max_reps=max_reps, flash_attn=True, n_gpu_layers=99
    )


def test_it_sizes_the_context_for_every_sequence_of_the_largest_batch() -> None:
    # The recorded abort: batch 16 of 128+32 tokens in a context too small for it.
    n_ctx = sweep.context_size(128, 32, [1, 2, 16])
    assert n_ctx >= 16 * (128 + 32)
    assert n_ctx % 16 == 0
    assert sweep.context_size(128, 64, [1, 2, 3, 4, 5, 8, 9, 12, 16]) == 16 * 256


def test_it_alternates_the_order_of_variants_each_round() -> None:
    assert sweep.interleaved_round(["A", "B", "C"], 0) == ["A", "B", "C"]
    assert sweep.interleaved_round(["A", "B", "C"], 1) == ["C", "B", "A"]


def test_it_measures_spread_only_with_two_reps_or_more() -> None:
    assert sweep.spread([100.0]) is None
    assert sweep.spread([99.0, 101.0]) == 0.02


def test_it_passes_the_sweep_settings_to_batched_bench() -> None:
    args = sweep.batched_bench_args(Path("/b/llama-batched-bench"), Path("m.gguf"), settings(batch_sizes=(1, 2, 16)))
    assert args[args.index("-npl") + 1] == "1,2,16"
    assert args[args.index("-c") + 1] == str(sweep.context_size(128, 32, [1, 2, 16]))
    assert args[args.index("-fa") + 1] == "on" and "-kvu" in args
    assert args[-2:] == ["--output-format", "jsonl"]


def test_it_runs_interleaved_and_records_an_abort_with_its_rows_and_exit_code(tmp_path: Path) -> None:
    good = replaying_tool(tmp_path / "good", REFERENCE / "batched-bench.jsonl.stdout", 0)
    aborting = replaying_tool(tmp_path / "bad", REFERENCE / "batched-bench.ctx-too-small.stdout", 134)
    seen: list[str] = []
    runs, flags = sweep.run_sweep(
        [("upstream", good, {}), ("01", aborting, {"GGML_X": "1"})],
        Path("m.gguf"),
        settings(),
        tmp_path / "logs",
        lambda detail, fraction: seen.append(detail),
    )
    assert [(run["variant"], run["rep"], run["seq"]) for run in runs] == [
        ("upstream", 1, 1),
        ("01", 1, 2),
        ("01", 2, 3),
        ("upstream", 2, 4),
    ]
    assert runs[1]["exit_code"] == 134 and [row["batch_size"] for row in runs[1]["rows"]] == [1, 2]
    assert [row["batch_size"] for row in runs[0]["rows"]] == [1, 2, 4]  # rows outside the sweep are dropped
    assert flags == ["sweep_row_missing"]  # identical replays: no spread
    assert any("upstream rep 1" in detail and "batch 4: 120.1 t/s" in detail for detail in seen)
    assert (tmp_path / "logs" / "batched-bench-002-01-rep1.cmd").read_text().startswith("GGML_X=1 ")


def test_it_adds_reps_while_the_spread_stays_high_up_to_the_cap(tmp_path: Path) -> None:
    first = replaying_tool(tmp_path / "a", REFERENCE / "batched-bench.jsonl.stdout", 0)
    second = replaying_tool(tmp_path / "b", REFERENCE.parent / "cuda-h200" / "bb-cuda-IQ2_XXS.jsonl", 0)
    # One variant alternating between two real outputs whose batch-1 rows differ far beyond 1%.
    flip = tmp_path / "flip"
    flip.mkdir()
    tool = flip / "llama-batched-bench"
    counter = tmp_path / "count"
    tool.write_text(
        f"#!/bin/sh\nn=$(cat '{counter}' 2>/dev/null || echo 0); echo $((n+1)) > '{counter}'\n"
        f"if [ $((n % 2)) -eq 0 ]; then exec '{first}/llama-batched-bench'; fi\n"
        f"exec '{second}/llama-batched-bench'\n"
    )
    tool.chmod(0o755)
    runs, flags = sweep.run_sweep(
        [("upstream", flip, {})],
        Path("m.gguf"),
        settings(reps=2, max_reps=4, batch_sizes=(1,)),
        tmp_path / "logs",
        lambda detail, fraction: None,
    )
    assert len(runs) == 4
    assert "high_spread" in flags


def test_it_shows_the_seed_format_with_spread() -> None:
    runs = [
        {"variant": "upstream", "rep": 1, "seq": 1, "exit_code": 0, "rows": [{"batch_size": 4, "tg_tps": 148.0}]},
        {"variant": "01", "rep": 1, "seq": 2, "exit_code": 0, "rows": [{"batch_size": 4, "tg_tps": 209.0}]},
        {"variant": "01", "rep": 2, "seq": 3, "exit_code": 0, "rows": [{"batch_size": 4, "tg_tps": 210.8}]},
        {"variant": "upstream", "rep": 2, "seq": 4, "exit_code": 0, "rows": [{"batch_size": 4, "tg_tps": 148.0}]},
    ]
    payload = {
        "variants": [
            {"name": "upstream", "commit": "0c1e57098bba" + "0" * 28},
            {"name": "01", "commit": "0c1e57098bba" + "0" * 28},
        ],
        "sweep": {"batch_sizes": [4], "runs": runs},
        "model": {"file_name": "q.gguf", "file_type": "IQ2_XXS"},
        "machine": {"chip": "Apple M5 Pro", "backend": "metal"},
        "correctness": [],
        "generation": [],
        "flags": [],
    }
    text = table(payload)
    assert "148.0→209.9 (+42%) ±0.9%" in text
    patched = next(cell for cell in cells(payload) if cell["variant"] == "01")
    assert patched["n_reps"] == 2 and round(patched["speedup"], 3) == round(209.9 / 148.0, 3)
