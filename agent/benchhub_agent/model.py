"""Facts about the GGUF model (docs/protocol.md 4.3), checked before anything is built."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import math
import mmap
import struct
from pathlib import Path
from types import ModuleType
from typing import Any

from benchhub_protocol.schema import safe_text

from .dirs import Dirs, write_atomic
from .errors import AgentError, ExitCode

GGUF_MAGIC = b"GGUF"
_HASH_CHUNK = 16 * 1024 * 1024


def _gguf_constants() -> ModuleType:
    """The gguf package's tables of tensor and file types (gguf/constants.py, which needs only the standard
    library), loaded without the package's __init__: that imports numpy for gguf's reader and writer, which
    the agent does not use, and was a third of the agent's start-up (0.2 s of 0.6 s)."""
    package = importlib.util.find_spec("gguf")  # finds the package without running it
    if package is None or not package.submodule_search_locations:
        raise ImportError("the gguf package is not installed")
    location = Path(next(iter(package.submodule_search_locations))) / "constants.py"
    spec = importlib.util.spec_from_file_location("benchhub_agent._gguf_constants", location)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {location}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


gguf = _gguf_constants()


def _bad(path: Path, why: str) -> AgentError:
    return AgentError(ExitCode.BAD_MODEL, f"MODEL.gguf {path} {why}.")  # names the argument at fault


def file_type_name(value: int) -> str:
    """`general.file_type` as llama.cpp names it: 15 -> "Q4_K_M" (gguf calls it MOSTLY_Q4_K_M)."""
    try:
        return gguf.LlamaFileType(value).name.removeprefix("MOSTLY_")
    except ValueError:
        return f"type_{value}"


_SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}
_STRING, _ARRAY = 8, 9
MAX_NESTING = 4  # arrays of arrays: gguf writes one level; a crafted file must not recurse without end
MAX_DIMS = 8  # ggml tensors have at most 4
MAX_ALIGNMENT = 1 << 20


class _Header:
    """A GGUF header parsed from the file mapped into memory (only the pages read are loaded; llama.cpp
    maps the same file to run it, so a model it can run can be mapped). gguf's
    GGUFReader builds an object per array element, which takes half a minute for a 262k-token
    vocabulary; here arrays nobody needs are skipped, a string array by its lengths alone."""

    def __init__(self, data: mmap.mmap) -> None:
        self.data = data
        self.offset = 0

    def unpack(self, fmt: str) -> Any:
        value = struct.unpack_from(fmt, self.data, self.offset)[0]  # struct.error past the end
        self.offset += struct.calcsize(fmt)
        return value

    def skip(self, size: int) -> None:
        self.offset += size
        if self.offset > len(self.data):
            raise ValueError("the header ends early")

    def string(self) -> str:
        length = self.unpack("<Q")
        if length > 1 << 24:
            raise ValueError("a string longer than 16 MiB")
        start = self.offset
        self.skip(length)
        return self.data[start : self.offset].decode("utf-8", errors="replace")

    def skip_strings(self, count: int) -> None:
        data, offset, unpack_from = self.data, self.offset, struct.unpack_from
        for _ in range(count):
            offset += 8 + unpack_from("<Q", data, offset)[0]
        self.offset = offset
        self.skip(0)

    def value(self, kind: int, depth: int = 0) -> Any:
        if kind in _SCALARS:
            return self.unpack(_SCALARS[kind])
        if kind == _STRING:
            return self.string()
        if kind == _ARRAY:
            if depth >= MAX_NESTING:
                raise ValueError(f"arrays nested more than {MAX_NESTING} deep")
            element, count = self.unpack("<I"), self.unpack("<Q")
            if element in _SCALARS:
                self.skip(struct.calcsize(_SCALARS[element]) * count)
            elif element == _STRING:
                self.skip_strings(count)
            else:
                # Each element takes at least 12 bytes (its type and count): a count the file cannot hold
                # is refused at once instead of looping over it.
                if count * 12 > len(self.data) - self.offset:
                    raise ValueError(f"an array of {count} elements longer than the file")
                for _ in range(count):
                    self.value(element, depth + 1)
            return None
        raise ValueError(f"unknown value type {kind}")


def _whole(value: object, path: Path, key: str, low: int, high: int) -> int:
    """An integer field within bounds (never a float, an infinity, a string or a bool)."""
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise _bad(path, f"has a {key} of {str(value)[:40]!r}, not an integer from {low} to {high}")
    return value


def read_gguf(path: Path) -> dict[str, Any]:
    """Architecture, parameter count, file type and bytes per tensor type; a clear error for a file
    that is missing, is not GGUF, or is cut short (its tensors reach past its end)."""
    if not path.is_file():
        raise _bad(path, "does not exist or is not a file")
    size = path.stat().st_size
    with path.open("rb") as handle:
        if handle.read(4) != GGUF_MAGIC:
            raise _bad(path, "is not a GGUF file (it does not start with the GGUF magic)")
        try:
            with mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as data:
                header = _Header(data)
                header.skip(4)  # the magic
                header.unpack("<I")  # version
                n_tensors, n_kv = header.unpack("<Q"), header.unpack("<Q")
                # A key-value pair takes at least 13 bytes, a tensor's entry at least 24.
                if n_kv * 13 + n_tensors * 24 > size:
                    raise ValueError(f"{n_kv} keys and {n_tensors} tensors do not fit in {size} bytes")
                fields = {}
                for _ in range(n_kv):
                    key = header.string()
                    fields[key] = header.value(header.unpack("<I"))
                tensors = []
                for _ in range(n_tensors):
                    header.string()
                    n_dims = header.unpack("<I")
                    if n_dims > MAX_DIMS:
                        raise ValueError(f"a tensor of {n_dims} dimensions")
                    dims = [header.unpack("<Q") for _ in range(n_dims)]
                    tensors.append((dims, header.unpack("<I"), header.unpack("<Q")))
                header_end = header.offset
        except (ValueError, struct.error, OSError, OverflowError, MemoryError) as error:
            raise _bad(path, f"is not a readable GGUF file ({error})") from error
    architecture = fields.get("general.architecture")
    if not isinstance(architecture, str) or not tensors:
        raise _bad(path, "has no general.architecture or no tensors")
    alignment = _whole(fields.get("general.alignment", 32), path, "general.alignment", 1, MAX_ALIGNMENT)
    if alignment & (alignment - 1):
        raise _bad(path, f"has a general.alignment of {alignment}, not a power of two")
    file_type = fields.get("general.file_type")
    if file_type is not None:
        file_type = _whole(file_type, path, "general.file_type", 0, 2**32 - 1)
    data_start = -(-header_end // alignment) * alignment
    bytes_by_type: dict[str, int] = {}
    n_params = end = 0
    for dims, type_id, offset in tensors:
        try:
            quant = gguf.GGMLQuantizationType(type_id)
        except ValueError as error:
            raise _bad(path, f"has a tensor of unknown type {type_id}") from error
        if quant not in gguf.GGML_QUANT_SIZES:
            raise _bad(path, f"has a tensor of type {quant.name}, whose size this agent does not know")
        elements = math.prod(dims)
        block_size, type_size = gguf.GGML_QUANT_SIZES[quant]
        n_bytes = elements // block_size * type_size
        bytes_by_type[quant.name] = bytes_by_type.get(quant.name, 0) + n_bytes
        n_params += elements
        end = max(end, data_start + offset + n_bytes)
    if end > size:
        raise _bad(path, f"is truncated: its tensors need {end} bytes, the file has {size}")
    facts = {
        "architecture": architecture,
        "n_params": n_params,
        "file_type": file_type_name(file_type) if file_type is not None else "unknown",
        "tensor_bytes_by_type": dict(sorted(bytes_by_type.items())),
    }
    return facts | _experts(fields, architecture, path)


def _experts(fields: dict[str, Any], architecture: str, path: Path) -> dict[str, int]:
    """A mixture of experts' expert_count and expert_used_count (docs/protocol.md 4.3), which bound
    the bytes a decode step reads; nothing for a dense model (absent keys, or a count of 0 or 1)."""
    count, used = fields.get(f"{architecture}.expert_count"), fields.get(f"{architecture}.expert_used_count")
    if count is None or used is None:
        return {}
    count = _whole(count, path, f"{architecture}.expert_count", 0, 4096)
    used = _whole(used, path, f"{architecture}.expert_used_count", 0, 4096)
    if count < 2 or not 1 <= used <= count:
        return {}
    return {"expert_count": count, "expert_used_count": used}


def sha256_cached(path: Path, dirs: Dirs) -> str:
    """SHA-256 of the file, remembered by its resolved path and stat: a 20 GB model is hashed once. The
    stamp holds the device, inode and ctime as well as size and mtime: another file of the same size moved
    in with a preserved mtime (`cp -p`, `rsync -a`) has another inode or a new ctime, which no user
    command can set back, so it is hashed again."""
    stat = path.stat()
    key = str(path.resolve())
    stamp = {
        "size": stat.st_size,
        "mtime_ns": stat.st_mtime_ns,
        "ctime_ns": stat.st_ctime_ns,
        "inode": stat.st_ino,
        "device": stat.st_dev,
    }
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
    return {name: safe_text(value) if isinstance(value, str) else value for name, value in result.items()}
