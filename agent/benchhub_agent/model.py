"""Facts about the GGUF model (PROTOCOL 4.3), checked before anything is built."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import gguf

from .dirs import Dirs, write_atomic
from .errors import AgentError, ExitCode

GGUF_MAGIC = b"GGUF"
_HASH_CHUNK = 16 * 1024 * 1024


def _bad(path: Path, why: str) -> AgentError:
    return AgentError(ExitCode.BAD_MODEL, f"{path} {why}.")


def _string_field(reader: gguf.GGUFReader, key: str) -> str | None:
    field = reader.fields.get(key)
    if field is None or not field.data:
        return None
    return bytes(field.parts[field.data[0]]).decode("utf-8", errors="replace")


def _int_field(reader: gguf.GGUFReader, key: str) -> int | None:
    field = reader.fields.get(key)
    if field is None or not field.data:
        return None
    return int(field.parts[field.data[0]][0])


def file_type_name(value: int) -> str:
    """`general.file_type` as llama.cpp names it: 15 -> "Q4_K_M" (gguf calls it MOSTLY_Q4_K_M)."""
    try:
        return gguf.LlamaFileType(value).name.removeprefix("MOSTLY_")
    except ValueError:
        return f"type_{value}"


def read_gguf(path: Path) -> dict[str, Any]:
    """Architecture, parameter count, file type and bytes per tensor type; a clear error for a file
    that is missing, is not GGUF, or is cut short (its tensors reach past its end)."""
    if not path.is_file():
        raise _bad(path, "does not exist or is not a file")
    with path.open("rb") as handle:
        if handle.read(4) != GGUF_MAGIC:
            raise _bad(path, "is not a GGUF file (it does not start with the GGUF magic)")
    size = path.stat().st_size
    try:
        reader = gguf.GGUFReader(path)
    except (ValueError, IndexError, OSError) as error:
        raise _bad(path, f"is not a readable GGUF file ({error})") from error
    architecture = _string_field(reader, "general.architecture")
    if not architecture or not reader.tensors:
        raise _bad(path, "has no general.architecture or no tensors")
    bytes_by_type: dict[str, int] = {}
    end = 0
    for tensor in reader.tensors:
        type_name = gguf.GGMLQuantizationType(tensor.tensor_type).name
        bytes_by_type[type_name] = bytes_by_type.get(type_name, 0) + int(tensor.n_bytes)
        end = max(end, int(tensor.data_offset) + int(tensor.n_bytes))
    if end > size:
        raise _bad(path, f"is truncated: its tensors need {end} bytes, the file has {size}")
    file_type = _int_field(reader, "general.file_type")
    return {
        "architecture": architecture,
        "n_params": sum(int(tensor.n_elements) for tensor in reader.tensors),
        "file_type": file_type_name(file_type) if file_type is not None else "unknown",
        "tensor_bytes_by_type": dict(sorted(bytes_by_type.items())),
    }


def sha256_cached(path: Path, dirs: Dirs) -> str:
    """SHA-256 of the file, remembered by (resolved path, size, mtime): a 20 GB model is hashed once."""
    stat = path.stat()
    key = str(path.resolve())
    stamp = {"size": stat.st_size, "mtime_ns": stat.st_mtime_ns}
    try:
        known: dict[str, Any] = json.loads(dirs.hashes.read_text())
    except (OSError, ValueError):
        known = {}
    entry = known.get(key)
    if isinstance(entry, dict) and {k: entry.get(k) for k in stamp} == stamp and isinstance(entry.get("sha256"), str):
        return str(entry["sha256"])
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(_HASH_CHUNK):
            digest.update(chunk)
    known[key] = {**stamp, "sha256": digest.hexdigest()}
    write_atomic(dirs.hashes, json.dumps(known, indent=1, sort_keys=True).encode())
    return digest.hexdigest()


def model_facts(path: Path, dirs: Dirs, label: str | None = None) -> dict[str, Any]:
    facts = read_gguf(path)
    result: dict[str, Any] = {
        "file_name": path.name,
        "sha256": sha256_cached(path, dirs),
        "size_bytes": path.stat().st_size,
        **facts,
    }
    if label:
        result["label"] = label
    return result
