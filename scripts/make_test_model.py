"""Write a small random-weight llama GGUF (F16) for exercising llama.cpp where no real model fits.

The device machine cannot download, and the carried working tree is capped at 64 MiB, so the GPU
end-to-end run uses a model made from the llama-spm vocabulary shipped in llama.cpp's tree. Every
matrix dimension is a multiple of 256 so that llama-quantize can turn it into any i-quant.
Random weights produce gibberish, not a repetition loop: the generation check still has work to do.

    python scripts/make_test_model.py LLAMA_SRC/models/ggml-vocab-llama-spm.gguf out-f16.gguf
"""

from __future__ import annotations

import argparse
from pathlib import Path

import gguf
import numpy as np


def copy_vocab(reader: gguf.GGUFReader, writer: gguf.GGUFWriter) -> int:
    fields = reader.fields
    tokens = [bytes(fields["tokenizer.ggml.tokens"].parts[i]) for i in fields["tokenizer.ggml.tokens"].data]
    scores = [float(fields["tokenizer.ggml.scores"].parts[i][0]) for i in fields["tokenizer.ggml.scores"].data]
    types = [int(fields["tokenizer.ggml.token_type"].parts[i][0]) for i in fields["tokenizer.ggml.token_type"].data]
    writer.add_tokenizer_model("llama")
    writer.add_token_list(tokens)
    writer.add_token_scores(scores)
    writer.add_token_types(types)
    for key, add in (
        ("tokenizer.ggml.bos_token_id", writer.add_bos_token_id),
        ("tokenizer.ggml.eos_token_id", writer.add_eos_token_id),
        ("tokenizer.ggml.unknown_token_id", writer.add_unk_token_id),
    ):
        if key in fields:
            add(int(fields[key].parts[-1][0]))
    return len(tokens)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("vocab", type=Path, help="llama.cpp models/ggml-vocab-llama-spm.gguf")
    parser.add_argument("out", type=Path)
    parser.add_argument("--embd", type=int, default=768)
    parser.add_argument("--layers", type=int, default=8)
    parser.add_argument("--ff", type=int, default=2048)
    parser.add_argument("--heads", type=int, default=12)
    parser.add_argument("--kv-heads", type=int, default=4)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()

    rng = np.random.default_rng(args.seed)
    writer = gguf.GGUFWriter(str(args.out), "llama")
    n_vocab = copy_vocab(gguf.GGUFReader(str(args.vocab)), writer)
    head_dim = args.embd // args.heads
    writer.add_name("benchhub random llama")
    writer.add_context_length(4096)
    writer.add_embedding_length(args.embd)
    writer.add_block_count(args.layers)
    writer.add_feed_forward_length(args.ff)
    writer.add_head_count(args.heads)
    writer.add_head_count_kv(args.kv_heads)
    writer.add_rope_dimension_count(head_dim)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_file_type(gguf.LlamaFileType.MOSTLY_F16)

    def matrix(rows: int, cols: int) -> np.ndarray:
        return (rng.standard_normal((rows, cols), dtype=np.float32) * 0.02).astype(np.float16)

    ones = np.ones(args.embd, dtype=np.float32)
    kv = args.kv_heads * head_dim
    writer.add_tensor("token_embd.weight", matrix(n_vocab, args.embd))
    for layer in range(args.layers):
        prefix = f"blk.{layer}"
        writer.add_tensor(f"{prefix}.attn_norm.weight", ones)
        writer.add_tensor(f"{prefix}.attn_q.weight", matrix(args.embd, args.embd))
        writer.add_tensor(f"{prefix}.attn_k.weight", matrix(kv, args.embd))
        writer.add_tensor(f"{prefix}.attn_v.weight", matrix(kv, args.embd))
        writer.add_tensor(f"{prefix}.attn_output.weight", matrix(args.embd, args.embd))
        writer.add_tensor(f"{prefix}.ffn_norm.weight", ones)
        writer.add_tensor(f"{prefix}.ffn_gate.weight", matrix(args.ff, args.embd))
        writer.add_tensor(f"{prefix}.ffn_up.weight", matrix(args.ff, args.embd))
        writer.add_tensor(f"{prefix}.ffn_down.weight", matrix(args.embd, args.ff))
    writer.add_tensor("output_norm.weight", ones)
    writer.add_tensor("output.weight", matrix(n_vocab, args.embd))

    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


if __name__ == "__main__":
    main()
