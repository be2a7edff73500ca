"""Write a random-weight llama GGUF directly in IQ4_NL (the tensor types `llama-quantize ... IQ4_NL`
picks at llama.cpp 0c1e570 without an imatrix: token_embd IQ4_NL, output Q6_K, attn_v Q5_K when
n_gqa >= 4, ffn_down of the first n_layer/8 layers Q5_K, every other matrix IQ4_NL, norms F32).

The quantized blocks are random bytes with their fp16 scale fields overwritten by small finite
values of random sign, so every weight decodes to a finite number of about +-0.02, mean zero.
Vocabulary: the tokenizer.*
keys of a vocab-only GGUF (models/ggml-vocab-llama-spm.gguf of the llama.cpp tree).
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from gguf import GGMLQuantizationType as T
from gguf import GGUFReader, GGUFValueType, GGUFWriter
from gguf.constants import GGML_QUANT_SIZES

FTYPE_IQ4_NL = 25  # LLAMA_FTYPE_MOSTLY_IQ4_NL


def fp16_field(rng: np.random.Generator, n: int, scale: float) -> np.ndarray:
    # A random sign per block, as quantizing zero-mean weights gives: with every scale positive the
    # codebooks' nonzero means (IQ4_NL's table averages -5.9) add a common-mode part to every product,
    # which grows layer by layer until every token decodes to the same one.
    signs = rng.choice(np.array([-1.0, 1.0]), n)
    return (signs * rng.uniform(0.5, 1.5, n) * scale).astype(np.float16).view(np.uint8).reshape(n, 2)


def random_blocks(rng: np.random.Generator, qtype: T, rows: int, cols: int) -> np.ndarray:
    block, size = GGML_QUANT_SIZES[qtype]
    assert cols % block == 0, (qtype, cols)
    n_blocks = rows * cols // block
    data = np.frombuffer(rng.bytes(n_blocks * size), dtype=np.uint8).reshape(n_blocks, size).copy()
    if qtype == T.IQ4_NL:  # d, qs[16]
        data[:, 0:2] = fp16_field(rng, n_blocks, 3.6e-4)
    elif qtype == T.Q5_K:  # d, dmin, scales[12], qh[32], qs[128]
        data[:, 0:2] = fp16_field(rng, n_blocks, 4e-5)
        data[:, 2:4] = fp16_field(rng, n_blocks, 4e-5)
    elif qtype == T.Q6_K:  # ql[128], qh[64], scales[16], d
        data[:, 208:210] = fp16_field(rng, n_blocks, 2e-5)
    else:
        raise ValueError(qtype)
    return data.reshape(rows, cols // block * size)


def copy_vocab(writer: GGUFWriter, vocab_path: str) -> int:
    reader = GGUFReader(vocab_path)
    n_vocab = 0
    for name, field in reader.fields.items():
        if not name.startswith("tokenizer."):
            continue
        main = field.types[0]
        value = field.contents()
        if main == GGUFValueType.ARRAY:
            writer.add_key_value(name, value, main, sub_type=field.types[-1])
            if name == "tokenizer.ggml.tokens":
                n_vocab = len(value)
        else:
            writer.add_key_value(name, value, main)
    return n_vocab


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("out")
    parser.add_argument("--vocab", required=True)
    parser.add_argument("--hidden", type=int, default=2048)
    parser.add_argument("--layers", type=int, default=16)
    parser.add_argument("--ffn", type=int, default=5632)
    parser.add_argument("--heads", type=int, default=32)
    parser.add_argument("--kv-heads", type=int, default=4)
    parser.add_argument("--ctx", type=int, default=4096)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    started = time.monotonic()
    rng = np.random.default_rng(args.seed)
    writer = GGUFWriter(args.out, "llama")
    writer.add_name(f"random-llama-{args.hidden}x{args.layers}")
    writer.add_file_type(FTYPE_IQ4_NL)
    writer.add_quantization_version(2)
    n_vocab = copy_vocab(writer, args.vocab)
    head_dim = args.hidden // args.heads
    writer.add_context_length(args.ctx)
    writer.add_embedding_length(args.hidden)
    writer.add_block_count(args.layers)
    writer.add_feed_forward_length(args.ffn)
    writer.add_head_count(args.heads)
    writer.add_head_count_kv(args.kv_heads)
    writer.add_rope_dimension_count(head_dim)
    writer.add_rope_freq_base(10000.0)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_vocab_size(n_vocab)
    kv = args.kv_heads * head_dim
    n_gqa = args.heads // args.kv_heads
    n_params = 0

    def mat(name: str, cols: int, rows: int, qtype: T) -> None:
        # gguf/ggml order: ne0 = cols (the input dimension), ne1 = rows
        nonlocal n_params
        writer.add_tensor(name, random_blocks(rng, qtype, rows, cols), raw_dtype=qtype)
        n_params += rows * cols

    def norm(name: str) -> None:
        nonlocal n_params
        writer.add_tensor(name, np.ones(args.hidden, dtype=np.float32))
        n_params += args.hidden

    mat("token_embd.weight", args.hidden, n_vocab, T.IQ4_NL)
    for layer in range(args.layers):
        p = f"blk.{layer}."
        norm(p + "attn_norm.weight")
        mat(p + "attn_q.weight", args.hidden, args.hidden, T.IQ4_NL)
        mat(p + "attn_k.weight", args.hidden, kv, T.IQ4_NL)
        mat(p + "attn_v.weight", args.hidden, kv, T.Q5_K if n_gqa >= 4 else T.IQ4_NL)
        mat(p + "attn_output.weight", args.hidden, args.hidden, T.IQ4_NL)
        norm(p + "ffn_norm.weight")
        mat(p + "ffn_gate.weight", args.hidden, args.ffn, T.IQ4_NL)
        mat(p + "ffn_up.weight", args.hidden, args.ffn, T.IQ4_NL)
        mat(p + "ffn_down.weight", args.ffn, args.hidden, T.Q5_K if layer < args.layers // 8 else T.IQ4_NL)
    norm("output_norm.weight")
    mat("output.weight", args.hidden, n_vocab, T.Q6_K)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    print(f"wrote {args.out}: {n_params:,} parameters, vocab {n_vocab}, {time.monotonic() - started:.1f} s")


if __name__ == "__main__":
    main()
