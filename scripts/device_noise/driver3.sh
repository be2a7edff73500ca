# Issue 44 device driver, detached: facts, wheels, one CUDA build (every variant plays the same binary: A/A),
# random-weight llamas of about 1B, 3B and 8B (make_model.py), the size probe (probe_sizes.py), then two agent
# runs back to back on the 8B model at the campaign's defaults (time budget MAX_MINUTES), --no-upload.
set -u
A=/home/user/aa3; K=$A/kit; H=$A/home; S=/tmp/site3
log() { echo "$(date +%s) $*" >> $A/log; }
log "driver start"
[ -x /usr/local/cuda/bin/nvcc ] && export PATH=$PATH:/usr/local/cuda/bin
{ date -u; python3 -V; nvidia-smi; nproc; free -g; uname -a; cmake --version | head -1; c++ --version | head -1; nvcc --version | tail -2; } > $A/facts.txt 2>&1
python3 -m pip install -q --no-index --no-deps --no-compile --ignore-requires-python --target $S $K/wheels/*.whl > $A/pip.txt 2>&1
echo "rc=$?" >> $A/pip.txt
export PYTHONPATH=$S
log "pip done: $(tail -1 $A/pip.txt)"
mkdir -p $A/src $A/model
tar xzf $K/llama.cpp-0c1e570.tar.gz -C $A/src
SRC=$A/src/llama.cpp-0c1e570
VOCAB=$SRC/models/ggml-vocab-llama-spm.gguf
(
  python3 $K/make_model.py $A/model/random-llama-1b-IQ4_NL.gguf --vocab $VOCAB --hidden 2048 --layers 22 --ffn 5632 --heads 32 --kv-heads 4 > $A/model-1b.txt 2>&1
  python3 $K/make_model.py $A/model/random-llama-3b-IQ4_NL.gguf --vocab $VOCAB --hidden 3072 --layers 28 --ffn 8192 --heads 24 --kv-heads 8 > $A/model-3b.txt 2>&1
  python3 $K/make_model.py $A/model/random-llama-8b-IQ4_NL.gguf --vocab $VOCAB --hidden 4096 --layers 32 --ffn 14336 --heads 32 --kv-heads 8 > $A/model-8b.txt 2>&1
  touch $A/MODELS
) &
t0=$(date +%s)
( cd $SRC && cmake -B build -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF \
    -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=OFF -DLLAMA_BUILD_SERVER=OFF > $A/build.txt 2>&1 \
  && cmake --build build --config Release -j 16 --target llama-batched-bench test-backend-ops llama-completion >> $A/build.txt 2>&1 )
log "build rc=$? seconds=$(( $(date +%s) - t0 ))"
BIN=$SRC/build/bin
while [ ! -f $A/MODELS ]; do sleep 2; done
log "models: $(cat $A/model-*.txt | tr '\n' ' ')"
nvidia-smi dmon -s pucv -d 5 -o T > $A/dmon.txt 2>&1 &
DMON=$!
M=$A/model
python3 $K/probe_sizes.py $BIN $A/probe ${PROBE_ROUNDS:-8} \
  1b-ntg64=$M/random-llama-1b-IQ4_NL.gguf:64 3b-ntg64=$M/random-llama-3b-IQ4_NL.gguf:64 \
  8b-ntg64=$M/random-llama-8b-IQ4_NL.gguf:64 8b-ntg256=$M/random-llama-8b-IQ4_NL.gguf:256 > $A/probe.txt 2>&1
log "probe done rc=$?"
export BENCHHUB_HOME=$H
{ python3 -m benchhub_agent --version; python3 -m benchhub_agent doctor --backend cuda; echo "doctor rc=$?"; } > $A/agent-info.txt 2>&1
run_agent() {
  local name=$1; shift
  log "$name start"
  local t0=$(date +%s)
  python3 -m benchhub_agent run $M/random-llama-8b-IQ4_NL.gguf --backend cuda \
      --variant upstream=$BIN --variant 01=$BIN --variant 01+02=$BIN \
      --no-upload --yes --json --max-minutes ${MAX_MINUTES:-5} "$@" > $A/$name.json 2> >(python3 $K/ts.py $A/$name.stderr)
  local rc=$?
  sleep 1
  log "$name end rc=$rc seconds=$(( $(date +%s) - t0 ))"
  cp $(ls -t $H/data/results/*/payload.json 2>/dev/null | head -1) $A/$name-payload.json 2>/dev/null
}
run_agent run1
run_agent run2
kill $DMON
log "driver done"
touch $A/DONE
