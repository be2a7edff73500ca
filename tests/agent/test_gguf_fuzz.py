"""A small fuzz corpus of GGUF headers (issue 31): every malformed file is a bad-model refusal with its exit
code (3), never a crash, a hang or a traceback. Before issue 31, arrays nested a few thousand deep raised
RecursionError, a string general.alignment ValueError, an alignment of 0 ZeroDivisionError and an
infinite general.file_type OverflowError, each an "unexpected" failure with exit code 1.
"""

from __future__ import annotations

import random
import struct
import time
from pathlib import Path

import pytest
from benchhub_agent import model
from benchhub_agent.errors import AgentError, ExitCode

U32, U64, F32, F64, STRING, ARRAY = 4, 10, 6, 12, 8, 9


def text(value: str) -> bytes:
    data = value.encode()
    return struct.pack("<Q", len(data)) + data


def kv(key: str, kind: int, payload: bytes) -> bytes:
    return text(key) + struct.pack("<I", kind) + payload


def gguf(fields: list[bytes], tensor: bytes | None = None, data: bytes = b"\0" * 128, n_tensors: int = 1) -> bytes:
    """A GGUF v3 file: the given key-value pairs, one F32 tensor of 32 elements, its data aligned to 32."""
    tensor = (
        tensor
        if tensor is not None
        else text("t") + struct.pack("<I", 1) + struct.pack("<Q", 32) + struct.pack("<IQ", 0, 0)
    )
    header = b"GGUF" + struct.pack("<IQQ", 3, n_tensors, len(fields)) + b"".join(fields) + tensor
    return header + b"\0" * (-len(header) % 32) + data


ARCH = kv("general.architecture", STRING, text("llama"))
VALID = gguf(
    [ARCH, kv("general.alignment", U32, struct.pack("<I", 32)), kv("general.file_type", U32, struct.pack("<I", 1))]
)


def nested_arrays(depth: int) -> bytes:
    return struct.pack("<IQ", ARRAY, 1) * depth + struct.pack("<IQ", U32, 0)


CORPUS = {
    "deep nesting": gguf([ARCH, kv("x", ARRAY, nested_arrays(5000))]),
    "nesting within reason but an endless count": gguf([ARCH, kv("x", ARRAY, struct.pack("<IQ", ARRAY, 2**62))]),
    "string alignment": gguf([ARCH, kv("general.alignment", STRING, text("thirty-two"))]),
    "zero alignment": gguf([ARCH, kv("general.alignment", U32, struct.pack("<I", 0))]),
    "alignment not a power of two": gguf([ARCH, kv("general.alignment", U32, struct.pack("<I", 24))]),
    "float alignment": gguf([ARCH, kv("general.alignment", F32, struct.pack("<f", 32.0))]),
    "infinite file type": gguf([ARCH, kv("general.file_type", F64, struct.pack("<d", float("inf")))]),
    "not-a-number file type": gguf([ARCH, kv("general.file_type", F32, struct.pack("<f", float("nan")))]),
    "string file type": gguf([ARCH, kv("general.file_type", STRING, text("Q4_K_M"))]),
    "file type beyond 32 bits": gguf([ARCH, kv("general.file_type", U64, struct.pack("<Q", 2**40))]),
    "huge key count": b"GGUF" + struct.pack("<IQQ", 3, 1, 2**63) + ARCH,
    "huge tensor count": b"GGUF" + struct.pack("<IQQ", 3, 2**63, 1) + ARCH,
    "huge string length": gguf([kv("general.architecture", STRING, struct.pack("<Q", 2**63) + b"x")]),
    "huge dimension count": gguf([ARCH], text("t") + struct.pack("<I", 2**32 - 1) + struct.pack("<Q", 1) * 4),
    "unknown value type": gguf([ARCH, kv("x", 99, b"\0" * 8)]),
    "unknown tensor type": gguf([ARCH], text("t") + struct.pack("<IQ", 1, 32) + struct.pack("<IQ", 9999, 0)),
    "tensor data past the end": gguf([ARCH], text("t") + struct.pack("<IQ", 1, 32) + struct.pack("<IQ", 0, 2**40)),
    "no architecture": gguf([kv("general.alignment", U32, struct.pack("<I", 32))]),
    "architecture not a string": gguf([kv("general.architecture", U32, struct.pack("<I", 7))]),
    "no tensors": gguf([ARCH], b"", b"", n_tensors=0),
    "magic only": b"GGUF",
    "empty": b"",
    "not gguf": b"\x7fELF" + b"\0" * 60,
}


def read_or_refuse(path: Path) -> dict[str, object] | None:
    """The facts, or None for a bad-model refusal; anything else fails the test."""
    started = time.monotonic()
    try:
        facts = model.read_gguf(path)
    except AgentError as error:
        assert error.code == ExitCode.BAD_MODEL, error.message
        assert str(path) in error.message
        return None
    finally:
        assert time.monotonic() - started < 2.0
    return facts


@pytest.mark.parametrize("case", sorted(CORPUS))
def test_every_malformed_header_is_a_bad_model_refusal(case: str, tmp_path: Path) -> None:
    path = tmp_path / "crafted.gguf"
    path.write_bytes(CORPUS[case])
    assert read_or_refuse(path) is None


def test_the_valid_header_of_the_corpus_is_read_and_an_unknown_file_type_is_named_not_refused(tmp_path: Path) -> None:
    path = tmp_path / "valid.gguf"
    path.write_bytes(VALID)
    assert read_or_refuse(path) == {
        "architecture": "llama",
        "n_params": 32,
        "file_type": "F16",
        "tensor_bytes_by_type": {"F32": 128},
    }
    path.write_bytes(gguf([ARCH, kv("general.file_type", U32, struct.pack("<I", 4242))]))
    facts = read_or_refuse(path)
    assert facts is not None and facts["file_type"] == "type_4242"


def test_every_truncation_and_byte_flip_of_a_valid_header_is_read_or_refused(tmp_path: Path) -> None:
    path = tmp_path / "mutant.gguf"
    header = VALID[: len(VALID) - 128]
    for end in range(len(header)):
        path.write_bytes(VALID[:end])
        assert read_or_refuse(path) is None, f"cut at {end}"
    chance = random.Random(31)
    for _ in range(400):
        mutant = bytearray(VALID)
        for _ in range(chance.randint(1, 4)):
            mutant[chance.randrange(4, len(header))] = chance.choice((0, 1, 0x7F, 0x80, 0xFF, chance.randrange(256)))
        path.write_bytes(bytes(mutant))
        read_or_refuse(path)
