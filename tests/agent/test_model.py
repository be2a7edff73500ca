from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

import pytest
from benchhub_agent import model
from benchhub_agent.dirs import home
from benchhub_agent.errors import AgentError, ExitCode

GEMMA = Path(os.environ.get("BENCHHUB_FIXTURES", Path.home() / ".cache/benchhub-fixtures")) / "gemma-3-270m-q4_k_m.gguf"


@pytest.fixture
def _gemma_fetched() -> None:
    """A missing fixture fails the run (never a skip reported as a pass): `make test` fetches it."""
    if not GEMMA.is_file():
        pytest.fail(f"{GEMMA} is missing: run `make fixtures` (scripts/fixtures.sh).")


needs_gemma = pytest.mark.usefixtures("_gemma_fetched")


@needs_gemma
def test_it_reads_the_facts_of_the_real_gemma_model() -> None:
    facts = model.read_gguf(GEMMA)
    assert facts["architecture"] == "gemma3"
    assert facts["file_type"] == "Q4_K_M"
    assert facts["n_params"] == 268_098_176
    assert "Q4_K" in facts["tensor_bytes_by_type"]
    assert sum(facts["tensor_bytes_by_type"].values()) < GEMMA.stat().st_size


@needs_gemma
def test_it_agrees_with_the_gguf_package_reader() -> None:
    import gguf

    reader = gguf.GGUFReader(GEMMA)
    expected: dict[str, int] = {}
    for tensor in reader.tensors:
        name = gguf.GGMLQuantizationType(tensor.tensor_type).name
        expected[name] = expected.get(name, 0) + int(tensor.n_bytes)
    facts = model.read_gguf(GEMMA)
    assert facts["tensor_bytes_by_type"] == expected
    assert facts["n_params"] == sum(int(tensor.n_elements) for tensor in reader.tensors)


@needs_gemma
def test_it_refuses_a_copy_cut_inside_its_header(tmp_path: Path) -> None:
    cut = tmp_path / "cut.gguf"
    with GEMMA.open("rb") as source, cut.open("wb") as target:
        target.write(source.read(100_000))
    with pytest.raises(AgentError, match="not a readable GGUF file") as caught:
        model.read_gguf(cut)
    assert caught.value.code == ExitCode.BAD_MODEL


@needs_gemma
def test_it_refuses_a_copy_cut_anywhere_in_its_header_with_the_same_clear_error(tmp_path: Path) -> None:
    """Cuts inside the magic, the counts, a key, the 262k-token vocabulary (skipped by its lengths
    alone) and the tensor list: each is a BAD_MODEL refusal, never an unhandled exception."""
    with GEMMA.open("rb") as source:
        header = source.read(6_600_000)  # the header ends at 6,525,112 bytes
    cut = tmp_path / "cut.gguf"
    # magic, version, counts, a key, tokens (to 4.41 MB), scores, token types, the tensor list, the data
    for size in (4, 10, 23, 40, 1_000, 1_000_000, 4_000_000, 5_000_000, 6_000_000, 6_515_000, 6_600_000):
        cut.write_bytes(header[:size])
        with pytest.raises(AgentError) as caught:
            model.read_gguf(cut)
        assert caught.value.code == ExitCode.BAD_MODEL, size
        assert "not a readable GGUF file" in caught.value.message or "is truncated" in caught.value.message, size


@needs_gemma
def test_it_refuses_a_truncated_copy(tmp_path: Path) -> None:
    cut = tmp_path / "cut.gguf"
    with GEMMA.open("rb") as source, cut.open("wb") as target:
        target.write(source.read(GEMMA.stat().st_size // 2))
    with pytest.raises(AgentError) as caught:
        model.read_gguf(cut)
    assert caught.value.code == ExitCode.BAD_MODEL
    assert "is truncated: its tensors need" in caught.value.message


def test_it_refuses_a_file_that_is_not_gguf(tmp_path: Path) -> None:
    text = tmp_path / "model.gguf"
    text.write_text("not a model")
    with pytest.raises(AgentError, match="not a GGUF file") as caught:
        model.read_gguf(text)
    assert caught.value.code == ExitCode.BAD_MODEL


def test_it_refuses_a_missing_file(tmp_path: Path) -> None:
    with pytest.raises(AgentError, match="does not exist"):
        model.read_gguf(tmp_path / "absent.gguf")


def test_it_hashes_once_and_again_only_when_the_file_changes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blob = tmp_path / "blob.gguf"
    blob.write_bytes(b"GGUF" + b"x" * 1000)
    dirs = home()
    first = model.sha256_cached(blob, dirs)
    assert first == hashlib.sha256(blob.read_bytes()).hexdigest()

    def no_second_hash(*args: object) -> None:
        raise AssertionError("hashed again")

    monkeypatch.setattr(model.hashlib, "sha256", no_second_hash)
    assert model.sha256_cached(blob, dirs) == first
    monkeypatch.undo()
    blob.write_bytes(b"GGUF" + b"y" * 1001)
    assert model.sha256_cached(blob, dirs) == hashlib.sha256(blob.read_bytes()).hexdigest()


def test_it_names_file_types_as_llama_cpp_does() -> None:
    assert model.file_type_name(15) == "Q4_K_M"
    assert model.file_type_name(19) == "IQ2_XXS"
    assert model.file_type_name(9999) == "type_9999"


@needs_gemma
def test_it_assembles_the_model_section_with_hash_and_label(tmp_path: Path) -> None:
    copy = tmp_path / "g.gguf"
    shutil.copyfile(GEMMA, copy)
    facts = model.model_facts(copy, home(), label="Gemma 3 270M")
    assert facts["file_name"] == "g.gguf" and facts["label"] == "Gemma 3 270M"
    assert len(facts["sha256"]) == 64 and facts["size_bytes"] == GEMMA.stat().st_size


@needs_gemma
def test_the_real_models_facts_hold_together_as_the_service_checks_them() -> None:
    from benchhub_protocol import model_facts

    facts = {**model.read_gguf(GEMMA), "size_bytes": GEMMA.stat().st_size}
    assert model_facts.contradictions(facts) == []
    assert "expert_count" not in facts, "a dense model"


def _tiny_gguf(path: Path, architecture: str, experts: tuple[int, int] | None) -> Path:
    import gguf
    import numpy as np

    writer = gguf.GGUFWriter(str(path), architecture)
    writer.add_file_type(gguf.LlamaFileType.ALL_F32)
    if experts is not None:
        writer.add_expert_count(experts[0])
        writer.add_expert_used_count(experts[1])
    writer.add_tensor("blk.0.ffn_up_exps.weight", np.zeros((4, 8, 32), dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def test_it_reads_the_expert_counts_of_a_mixture_of_experts(tmp_path: Path) -> None:
    facts = model.read_gguf(_tiny_gguf(tmp_path / "moe.gguf", "qwen3moe", (128, 8)))
    assert (facts["expert_count"], facts["expert_used_count"]) == (128, 8)
    dense = model.read_gguf(_tiny_gguf(tmp_path / "dense.gguf", "llama", None))
    assert "expert_count" not in dense and "expert_used_count" not in dense
