#!/bin/bash
# The CUDA end to end of benchhub-agent, for a machine with one NVIDIA GPU and no network (the device
# tool's nvidia-h200). It builds the three variants with -DGGML_CUDA=ON from the pinned tarball, makes a
# random-weight llama IQ2_XXS (scripts/make_test_model.py + llama-imatrix + llama-quantize), runs
# `benchhub-agent run --backend cuda --no-upload`, and leaves nvidia-smi.txt, summary.json, agent.stderr,
# payload.json, envelope.json and logs.tar.gz in $OUT (default /tmp/devout).
#
# Prepare here, in the repo root (the folder is ignored and travels with `carry: [".devcarry"]`):
#   echo /.devcarry/ >> .git/info/exclude; mkdir -p .devcarry/whl
#   cp "$BENCHHUB_FIXTURES/llama.cpp-0c1e570.tar.gz" .devcarry/
#   for p in PyNaCl==1.6.2 cffi pycparser jsonschema==4.26.0 jsonschema-specifications referencing rpds-py \
#            rfc8785==0.1.4 gguf==0.19.0 platformdirs==4.14.8; do
#     python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
#       --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
#       -d .devcarry/whl "$p"; done
# Run there (a cold CUDA build of these targets takes several minutes on 16 cores, so start it detached
# and collect it in a second call): `setsid nohup bash tests/e2e/cuda_on_device.sh > /tmp/devrun.log 2>&1 &`
set -uo pipefail
OUT=${OUT_DIR:-/tmp/devout}
CARRY=${CARRY:-.devcarry}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 BENCHHUB_HOME=/tmp/bh-home
# --ignore-requires-python: the lent machine's Python is not ours to choose (the agent asks contributors for
# one with tarfile's fixes; the test runs its own source copied below).
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --ignore-requires-python \
  --target /tmp/site "$CARRY"/whl/*.whl || exit 1
rm -rf /tmp/site/benchhub_agent && cp -rL agent/benchhub_agent /tmp/site/
export PYTHONPATH=/tmp/site
nvidia-smi > "$OUT/nvidia-smi.txt"
python3 - "$CARRY/llama.cpp-0c1e570.tar.gz" <<'PY' 2>&1 | tee "$OUT/prepare.log"
import subprocess, sys
from pathlib import Path
from benchhub_agent import build, campaign, source
from benchhub_agent.dirs import home
plan = campaign.bundled("mv-ext-iquants")
pristine = source.from_user(Path(sys.argv[1]), home())
config = build.BuildConfig("cuda", ("-DCMAKE_CUDA_ARCHITECTURES=90",))
tools = build.build_variants([plan.variant("upstream")], pristine, config, home(), Path("/tmp/bh-logs"),
                             lambda detail, fraction: print(detail, flush=True),
                             targets=("llama-quantize", "llama-imatrix"))[0].bin_dir
subprocess.run([sys.executable, "scripts/make_test_model.py", str(pristine / "models/ggml-vocab-llama-spm.gguf"),
                "/tmp/rand-f16.gguf"], check=True)
text = Path("/tmp/calibration.txt")
text.write_text("\n\n".join(p.read_text() for p in sorted((pristine / "docs").glob("*.md"))))
subprocess.run([str(tools / "llama-imatrix"), "-m", "/tmp/rand-f16.gguf", "-f", str(text), "-o", "/tmp/imatrix.gguf",
                "--chunks", "4", "-c", "256", "-ngl", "99"], check=True, capture_output=True)
subprocess.run([str(tools / "llama-quantize"), "--imatrix", "/tmp/imatrix.gguf", "/tmp/rand-f16.gguf",
                "/tmp/rand-IQ2_XXS.gguf", "IQ2_XXS"], check=True, capture_output=True)
print("model ready")
PY
[ -f /tmp/rand-IQ2_XXS.gguf ] || exit 2
python3 -m benchhub_agent run /tmp/rand-IQ2_XXS.gguf --backend cuda --llama-src "$CARRY/llama.cpp-0c1e570.tar.gz" \
  --cmake-arg=-DCMAKE_CUDA_ARCHITECTURES=90 --batch-sizes 1,2,4,8 --reps 2 --gen-tokens 32 \
  --label "random llama IQ2_XXS (CUDA e2e)" --no-upload --json > "$OUT/summary.json" 2> "$OUT/agent.stderr"
echo "agent exit code $?"
RESULT=$(ls -td "$BENCHHUB_HOME"/data/results/*/ | head -1)
cp "$RESULT/payload.json" "$RESULT/envelope.json" "$OUT/"
tar czf "$OUT/logs.tar.gz" -C "$RESULT/logs" .
echo ALLDONE
