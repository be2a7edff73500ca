"""The payload schemas of docs/protocol.md, defined once.

The agent validates what it is about to sign; the server validates what it has verified. Both
call `validate_submission` / `validate_registration`, which raise `SchemaViolation` naming the
field at fault as a dotted path (`sweep.runs[2].rows[0].tg_tps`).
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterator
from datetime import datetime
from functools import cache
from typing import Any

SCHEMA_VERSION = 1

FLAGS = (
    "degenerate_output",
    "correctness_failed",
    "high_spread",
    "target_not_reached",
    "on_battery",
    "low_power_mode",
    "thermal_pressure",
    "variant_output_mismatch",
    "sweep_row_missing",
)
BACKENDS = ("metal", "cuda", "vulkan", "cpu")
CORRECTNESS_STATUSES = ("pass", "fail", "not_run")
# llama-batched-bench switches a campaign may add to the sweep, beyond what the agent always passes
# (-kvu, -fa, -ngl, -npp, -ntg, -npl, -c). A closed list: the agent runs what a server's manifest
# names, so a manifest must not be able to hand it arbitrary arguments. -pps shares the prompt across
# the batch's sequences, as llama.cpp PR #29869 measured.
SWEEP_EXTRA_ARGS = ("-pps",)

HANDLE_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9-]{0,38}$"
SLUG_PATTERN = r"^[a-z0-9][a-z0-9-]{0,63}$"
RFC3339_UTC_PATTERN = r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,9})?Z$"
BASE64_KEY_PATTERN = r"^[A-Za-z0-9+/]{43}=$"

_str = {"type": "string", "maxLength": 200}
_name = {"type": "string", "minLength": 1, "maxLength": 64}
# Every number has finite bounds a real run stays far inside, so no ratio or median of accepted
# numbers can overflow to inf or vanish to 0 (5e-324 and 1e300 were accepted, and their ratio was inf).
_tokens_per_second = {"type": "number", "minimum": 0.001, "maximum": 1e7}
_seconds = {"type": "number", "minimum": 1e-6, "maximum": 1e6}
_bytes = {"type": "integer", "minimum": 0, "maximum": 2**50}  # 1 PiB
_cores = {"type": "integer", "minimum": 0, "maximum": 4096}
_test_count = {"type": "integer", "minimum": 0, "maximum": 1_000_000}
_hex64 = {"type": "string", "pattern": "^[0-9a-f]{64}$"}
_hex40 = {"type": "string", "pattern": "^[0-9a-f]{40}$"}


def _object(properties: dict[str, Any], optional: tuple[str, ...] = ()) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": properties,
        "required": [name for name in properties if name not in optional],
        "additionalProperties": False,
    }


def _list(items: dict[str, Any], max_items: int, min_items: int = 0) -> dict[str, Any]:
    return {"type": "array", "items": items, "minItems": min_items, "maxItems": max_items}


REGISTRATION_SCHEMA: dict[str, Any] = _object(
    {
        "schema_version": {"const": SCHEMA_VERSION},
        "handle": {"type": "string", "pattern": HANDLE_PATTERN},
        "public_key": {"type": "string", "pattern": BASE64_KEY_PATTERN},
        "created_at": {"type": "string", "pattern": RFC3339_UTC_PATTERN},
    }
)

MACHINE_SCHEMA = _object(
    {
        "os": {"enum": ["macOS", "Linux"]},
        "os_version": _str,
        "os_build": _str,
        "arch": _str,
        "chip": {"type": "string", "minLength": 1, "maxLength": 200},
        "cpu_cores_performance": _cores,
        "cpu_cores_efficiency": _cores,
        "gpu_name": _str,
        "gpu_cores": {"type": ["integer", "null"], "minimum": 0, "maximum": 100000},
        "memory_bytes": _bytes,
        "backend": {"enum": list(BACKENDS)},
        "power_source": {"enum": ["ac", "battery", "unknown"]},
        "low_power_mode": {"type": ["boolean", "null"]},
        "thermal": {"enum": ["nominal", "pressure", "unknown"]},
        # A CUDA machine's row is named by its GPU (`chip`); the CPU beside it and the GPU's memory (0.2.0 on).
        "cpu": {"type": "string", "minLength": 1, "maxLength": 200},
        "gpu_memory_bytes": _bytes,
    },
    optional=("os_build", "cpu", "gpu_memory_bytes"),
)

MODEL_SCHEMA = _object(
    {
        "file_name": {"type": "string", "minLength": 1, "maxLength": 255},
        "sha256": _hex64,
        "size_bytes": _bytes,
        "architecture": _str,
        "n_params": {"type": "integer", "minimum": 0, "maximum": 10**14},
        "file_type": {"type": "string", "minLength": 1, "maxLength": 32},
        "label": _str,
        "expert_count": {"type": "integer", "minimum": 1, "maximum": 4096},
        "expert_used_count": {"type": "integer", "minimum": 1, "maximum": 4096},
        "tensor_bytes_by_type": {
            "type": "object",
            "maxProperties": 64,
            "propertyNames": {"maxLength": 32},
            "additionalProperties": _bytes,
        },
    },
    optional=("label", "expert_count", "expert_used_count"),
)

VARIANT_SCHEMA = _object(
    {
        "name": _name,
        "commit": _hex40,
        "patches": _list(_object({"name": _name, "sha256": _hex64}), 16),
        "env": {
            "type": "object",
            "maxProperties": 32,
            "propertyNames": {"pattern": "^[A-Za-z_][A-Za-z0-9_]{0,63}$"},
            "additionalProperties": _str,
        },
    }
)

SWEEP_ROW_SCHEMA = _object(
    {
        "batch_size": {"type": "integer", "minimum": 1, "maximum": 4096},
        "pp_tps": _tokens_per_second,
        "tg_tps": _tokens_per_second,
        "t_pp_s": _seconds,
        "t_tg_s": _seconds,
    }
)

SWEEP_SCHEMA = _object(
    {
        "tool": {"const": "llama-batched-bench"},
        "npp": {"type": "integer", "minimum": 1, "maximum": 1_000_000},
        "ntg": {"type": "integer", "minimum": 1, "maximum": 1_000_000},
        "n_ctx": {"type": "integer", "minimum": 1, "maximum": 10_000_000},
        "flash_attn": {"type": "boolean"},
        "n_gpu_layers": {"type": "integer", "minimum": -1, "maximum": 100_000},
        "batch_sizes": _list({"type": "integer", "minimum": 1, "maximum": 4096}, 64, 1),
        "order": {"const": "interleaved"},
        "extra_args": {
            "type": "array",
            "items": {"enum": list(SWEEP_EXTRA_ARGS)},
            "maxItems": len(SWEEP_EXTRA_ARGS),
            "uniqueItems": True,
        },
        # Batch sizes run before the measured pass of every process and dropped (agent 0.2.0 on).
        "warmup_batch_sizes": _list({"type": "integer", "minimum": 1, "maximum": 4096}, 64),
        # When the sweep stopped adding rounds, and why (agent 0.2.0 on; min_effect and "settled" from 0.3.0,
        # target_half_width, "target" and "minimum" before it).
        "stop": _object(
            {
                "target_half_width": {"type": "number", "minimum": 0, "maximum": 1},
                "min_effect": {"type": "number", "minimum": 0, "maximum": 1},
                "min_rounds": {"type": "integer", "minimum": 1, "maximum": 100},
                "max_rounds": {"type": "integer", "minimum": 1, "maximum": 100},
                "max_seconds": {"type": "number", "minimum": 0, "maximum": 86_400},
                "reason": {"enum": ["target", "rounds", "time", "minimum", "settled"]},
                "seconds": {"type": "number", "minimum": 0, "maximum": 864_000},
            },
            optional=("target_half_width", "min_effect"),
        ),
        # Cells v4 (docs/protocol.md 4.4): why the sweep ended, and the seed that ordered each cycle's runs.
        "stop_reason": {"enum": ["settled", "time", "rounds"]},
        "order_seed": {"type": "integer", "minimum": 0, "maximum": 2**53},
        "runs": _list(
            _object(
                {
                    "variant": _name,
                    "rep": {"type": "integer", "minimum": 1, "maximum": 100},
                    "seq": {"type": "integer", "minimum": 1, "maximum": 100_000},
                    "exit_code": {"type": "integer", "minimum": -255, "maximum": 255},
                    "rows": _list(SWEEP_ROW_SCHEMA, 64),
                }
            ),
            512,
            1,
        ),
    },
    # Optional so that a v1 payload written before campaigns had extra switches stays valid: absent is none.
    optional=("extra_args", "warmup_batch_sizes", "stop", "stop_reason", "order_seed"),
)

CORRECTNESS_SCHEMA = _object(
    {
        "variant": _name,
        "tool": {"const": "test-backend-ops"},
        "op": {"const": "MUL_MAT"},
        "backend": {"type": "string", "minLength": 1, "maxLength": 64},
        "status": {"enum": list(CORRECTNESS_STATUSES)},
        "passed": _test_count,
        "failed": _test_count,
        "reason": {"type": "string", "maxLength": 2000},
    },
    optional=("reason",),
)

GENERATION_SCHEMA = _object(
    {
        "variant": _name,
        "prompt_id": _name,
        "n_tokens": {"type": "integer", "minimum": 0, "maximum": 1_000_000},
        "output_sha256": _hex64,
        "degenerate": {"type": "boolean"},
        "repetition_score": {"type": "number", "minimum": 0, "maximum": 1},
        "identical_to_baseline": {"type": "boolean"},
    }
)

SUBMISSION_SCHEMA: dict[str, Any] = _object(
    {
        "schema_version": {"const": SCHEMA_VERSION},
        "nonce": {"type": "string", "pattern": "^[0-9a-f]{32}$"},
        "created_at": {"type": "string", "pattern": RFC3339_UTC_PATTERN},
        "agent": _object({"name": _name, "version": _name}),
        "campaign": {"type": "string", "pattern": SLUG_PATTERN},
        # The digest of the campaign version the run followed (cells version 4); absent: the version
        # open at created_at judges it.
        "campaign_digest": {"type": "string", "pattern": "^[0-9a-f]{64}$"},
        "machine": MACHINE_SCHEMA,
        "model": MODEL_SCHEMA,
        "llama_cpp": _object(
            {
                "repo": {"type": "string", "minLength": 1, "maxLength": 500},
                "build_type": _str,
                "cmake_flags": _list({"type": "string", "maxLength": 500}, 64),
                "compiler": _str,
                # "pinned": built from the campaign's commit fetched by git; "local": from --llama-src or
                # --variant binaries, which the service flags `local_source`. Absent in older agents' results.
                "source": {"enum": ["pinned", "local"]},
            },
            optional=("source",),
        ),
        "variants": _list(VARIANT_SCHEMA, 16, 1),
        "sweep": SWEEP_SCHEMA,
        "correctness": _list(CORRECTNESS_SCHEMA, 64),
        "generation": _list(GENERATION_SCHEMA, 256),
        "flags": {"type": "array", "items": {"enum": list(FLAGS)}, "maxItems": len(FLAGS), "uniqueItems": True},
    },
    optional=("campaign_digest",),
)


class SchemaViolation(ValueError):
    def __init__(self, field: str, detail: str) -> None:
        super().__init__(f"{field}: {detail}" if field else detail)
        self.field = field
        self.detail = detail


def _path(parts: Any) -> str:
    text = ""
    for part in parts:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text


@cache
def _validator(name: str) -> Any:
    """One jsonschema validator per schema, built on first use: the import is a sixth of the agent's
    start-up (bench/schema_cost.py), and most commands never validate a payload."""
    import jsonschema

    schema = {"submission": SUBMISSION_SCHEMA, "registration": REGISTRATION_SCHEMA}[name]
    return jsonschema.Draft202012Validator(schema)


def _raise_first(schema: dict[str, Any], obj: Any) -> None:
    validator = _validator("submission" if schema is SUBMISSION_SCHEMA else "registration")
    errors = sorted(validator.iter_errors(obj), key=lambda e: (list(map(str, e.absolute_path)), e.message))
    if not errors:
        return
    error = errors[0]
    path = list(error.absolute_path)
    if error.validator == "additionalProperties" and isinstance(error.instance, dict):
        allowed = set(error.schema.get("properties", {}))
        extra = sorted(k for k in error.instance if k not in allowed)
        if extra:
            raise SchemaViolation(_path([*path, extra[0]]), "unknown field")
    if error.validator == "required":
        missing = error.message.split("'")[1] if "'" in error.message else ""
        raise SchemaViolation(_path([*path, missing]), "required field is missing")
    raise SchemaViolation(_path(path), error.message[:300])


def _refuse_impossible_time(text: str) -> None:
    """The pattern admits 2026-13-40T99:99:99Z; the calendar does not."""
    try:
        datetime.strptime(text[:19], "%Y-%m-%dT%H:%M:%S")
    except ValueError:
        raise SchemaViolation("created_at", "not a real date and time") from None


# No string of a payload may hold these: controls, format characters (bidi overrides and isolates,
# zero-width joiners), surrogates, private use, line and paragraph separators. A chip name with
# U+202E showed reversed on every page; one in fullwidth letters (not NFKC) made a cell of its own.
UNSAFE_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Co", "Zl", "Zp"})
# Free text quoted from a tool's output keeps its own line breaks and tabs.
MULTILINE_FIELDS = {"reason": "\n\t"}


def safe_text(text: str) -> str:
    """What the agent reads from the machine or a GGUF header, made acceptable before it is signed:
    NFKC, without the characters refused below."""
    return "".join(
        char for char in unicodedata.normalize("NFKC", text) if unicodedata.category(char) not in UNSAFE_CATEGORIES
    )


def _texts(node: Any, path: list[str | int]) -> Iterator[tuple[list[str | int], str]]:
    """Every string of a parsed payload with its path; a key under its map's path, so that a field
    named in an error never holds the character it is refused for."""
    if isinstance(node, str):
        yield path, node
    elif isinstance(node, dict):
        for key, value in node.items():
            yield path, key
            yield from _texts(value, [*path, key])
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from _texts(value, [*path, index])


def _refuse_unsafe_text(obj: Any) -> None:
    """Refused rather than normalised: the stored rows must be what the key signed."""
    for path, text in _texts(obj, []):
        if text.isascii() and text.isprintable():  # nearly every string, and always safe
            continue
        kept = MULTILINE_FIELDS.get(str(path[-1]), "") if path else ""
        for char in text:
            if char not in kept and unicodedata.category(char) in UNSAFE_CATEGORIES:
                raise SchemaViolation(
                    _path(path), f"holds U+{ord(char):04X}, a control, bidi or other formatting character"
                )
        if unicodedata.normalize("NFKC", text) != text:
            raise SchemaViolation(_path(path), "is not in Unicode NFKC form (send unicodedata.normalize('NFKC', text))")


def validate_registration(obj: Any) -> None:
    _raise_first(REGISTRATION_SCHEMA, obj)
    _refuse_impossible_time(obj["created_at"])


def validate_submission(obj: Any) -> None:
    """Schema v1 plus the cross-references a schema cannot express."""
    _raise_first(SUBMISSION_SCHEMA, obj)
    _refuse_impossible_time(obj["created_at"])
    _refuse_unsafe_text(obj)
    names = [variant["name"] for variant in obj["variants"]]
    for index, name in enumerate(names):
        if name in names[:index]:
            raise SchemaViolation(f"variants[{index}].name", f"variant {name!r} appears twice")
    batch_sizes = obj["sweep"]["batch_sizes"]
    if len(set(batch_sizes)) != len(batch_sizes):
        raise SchemaViolation("sweep.batch_sizes", "batch sizes must be distinct")
    seqs = [run["seq"] for run in obj["sweep"]["runs"]]
    if len(set(seqs)) != len(seqs):
        raise SchemaViolation("sweep.runs", "seq values must be distinct")
    seen_reps: set[tuple[str, int]] = set()
    for index, run in enumerate(obj["sweep"]["runs"]):
        if run["variant"] not in names:
            raise SchemaViolation(f"sweep.runs[{index}].variant", f"{run['variant']!r} is not one of variants")
        if (run["variant"], run["rep"]) in seen_reps:
            raise SchemaViolation(f"sweep.runs[{index}].rep", "the same variant and rep appear twice")
        seen_reps.add((run["variant"], run["rep"]))
        row_sizes = [row["batch_size"] for row in run["rows"]]
        for row_index, size in enumerate(row_sizes):
            if size not in batch_sizes or size in row_sizes[:row_index]:
                raise SchemaViolation(
                    f"sweep.runs[{index}].rows[{row_index}].batch_size",
                    "batch size is not in sweep.batch_sizes or appears twice in one run",
                )
    for section in ("correctness", "generation"):
        for index, entry in enumerate(obj[section]):
            if entry["variant"] not in names:
                raise SchemaViolation(f"{section}[{index}].variant", f"{entry['variant']!r} is not one of variants")
