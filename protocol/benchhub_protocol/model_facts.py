"""What a payload says of its model file, checked against itself (docs/protocol.md section 7,
model identity), and the bytes one decode step reads. The agent reads these facts from the GGUF
header; the service refuses a payload whose facts contradict each other (400, naming the field)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

# No GGUF quantisation stores fewer bits a weight than IQ1_S (1.56), and none more than F32.
MIN_BITS_PER_WEIGHT, MAX_BITS_PER_WEIGHT = 1.5, 32
# A GGUF file is its tensors plus a header (metadata, vocabulary): at most this much more.
MAX_HEADER_BYTES = 64 * 2**20

# The tensor type each file type writes by default (llama.cpp's llama_ftype_get_default_type,
# src/llama-quant.cpp at the pinned commit): a file of that type holds some tensors of it. Other
# tensors may be kept at higher precision (embeddings, output, tensors whose rows do not fit a block).
DEFAULT_TENSOR_TYPE = {
    "ALL_F32": "F32", "F16": "F16", "BF16": "BF16",
    "Q4_0": "Q4_0", "Q4_1": "Q4_1", "Q5_0": "Q5_0", "Q5_1": "Q5_1", "Q8_0": "Q8_0", "Q1_0": "Q1_0",
    "Q2_K": "Q2_K", "Q2_K_S": "Q2_K", "Q3_K_S": "Q3_K", "Q3_K_M": "Q3_K", "Q3_K_L": "Q3_K",
    "Q4_K_S": "Q4_K", "Q4_K_M": "Q4_K", "Q5_K_S": "Q5_K", "Q5_K_M": "Q5_K", "Q6_K": "Q6_K",
    "IQ1_S": "IQ1_S", "IQ1_M": "IQ1_M", "IQ2_XXS": "IQ2_XXS", "IQ2_XS": "IQ2_XS", "IQ2_S": "IQ2_XS",
    "IQ2_M": "IQ2_S", "IQ3_XXS": "IQ3_XXS", "IQ3_XS": "IQ3_S", "IQ3_S": "IQ3_S", "IQ3_M": "IQ3_S",
    "IQ4_NL": "IQ4_NL", "IQ4_XS": "IQ4_XS", "TQ1_0": "TQ1_0", "TQ2_0": "TQ2_0", "MXFP4_MOE": "MXFP4",
}  # fmt: skip


@dataclass(frozen=True)
class Contradiction:
    field: str  # the payload path at fault, e.g. "model.size_bytes"
    detail: str  # one sentence


def contradictions(model: dict[str, Any]) -> list[Contradiction]:
    """Where the model's facts disagree with each other, one each (none: they hold together)."""
    weights = sum(model["tensor_bytes_by_type"].values())
    found = []
    if not weights:
        return [Contradiction("model.tensor_bytes_by_type", "The model's tensors add up to 0 bytes.")]
    if not weights <= model["size_bytes"] <= weights + MAX_HEADER_BYTES:
        found.append(
            Contradiction(
                "model.size_bytes",
                f"size_bytes {model['size_bytes']} cannot hold {weights} tensor bytes and a header of at most "
                f"{MAX_HEADER_BYTES} bytes.",
            )
        )
    n_params = model["n_params"]
    if not n_params * MIN_BITS_PER_WEIGHT / 8 <= weights <= n_params * MAX_BITS_PER_WEIGHT / 8:
        found.append(
            Contradiction(
                "model.n_params",
                f"{n_params} parameters cannot be stored in {weights} tensor bytes "
                f"({MIN_BITS_PER_WEIGHT}-{MAX_BITS_PER_WEIGHT} bits a weight).",
            )
        )
    expected = DEFAULT_TENSOR_TYPE.get(model["file_type"])
    if expected is not None and not model["tensor_bytes_by_type"].get(expected):
        found.append(
            Contradiction(
                "model.file_type",
                f"A {model['file_type']} file holds {expected} tensors; this one lists none.",
            )
        )
    count, used = model.get("expert_count"), model.get("expert_used_count")
    if (count is None) != (used is None):
        field = "model.expert_used_count" if used is None else "model.expert_count"
        found.append(Contradiction(field, "expert_count and expert_used_count come together or not at all."))
    elif count is not None and used is not None and not (count >= 2 and 1 <= used <= count):
        found.append(
            Contradiction(
                "model.expert_used_count", f"{used} experts used of {count}: needs 1 <= used <= count, count >= 2."
            )
        )
    return found


def decode_bytes(model: dict[str, Any]) -> float:
    """The fewest bytes one decode step of one token can read: every tensor for a dense model. For a
    mixture of experts, the payload does not split expert tensors from dense ones, so the bound
    assumes the most favourable split (every tensor an expert's): used / count of the tensors. It
    never holds an honest run back; a false MoE claim gains at most count / used of headroom, and
    its facts must then agree with the file's claim that has standing (model identity)."""
    weights = float(sum(model["tensor_bytes_by_type"].values()))
    count, used = model.get("expert_count"), model.get("expert_used_count")
    if count and used and used <= count:
        return weights * used / count
    return weights
