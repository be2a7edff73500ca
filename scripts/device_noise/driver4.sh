# Issue 44, the device A/A runs at the campaign's defaults (detached; go4.sh starts it, poll4.sh waits on it):
# facts, wheels, one CUDA build that every variant plays (A/A), the random-weight ~8B IQ4_NL llama
# (make_model.py), then two agent runs back to back with no budget of their own (the campaign's: 15 min of
# sweep), --no-upload. No probe: its figures are in tests/agent/fixtures/noise-by-size/.
set -u
A=/home/user/aa4; K=$A/kit; H=$A/home; S=/tmp/site4
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
M=$A/model/random-llama-8b-IQ4_NL.gguf
( python3 $K/make_model.py $M --vocab $VOCAB --hidden 4096 --layers 32 --ffn 14336 --heads 32 --kv-heads 8 > $A/model-8b.txt 2>&1
  touch $A/MODELS ) &
t0=$(date +%s)
# GGML_CUDA_COMPRESSION_MODE=none: the fatbin is stored uncompressed (the kernels are the same; it only skips
# compressing them at link time).
( cd $SRC && cmake -B build -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DGGML_CUDA_COMPRESSION_MODE=none \
    -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=OFF -DLLAMA_BUILD_SERVER=OFF > $A/build.txt 2>&1 \
  && cmake --build build --config Release -j 16 --target llama-batched-bench test-backend-ops llama-completion >> $A/build.txt 2>&1 )
log "build rc=$? seconds=$(( $(date +%s) - t0 ))"
BIN=$SRC/build/bin
while [ ! -f $A/MODELS ]; do sleep 2; done
log "model: $(cat $A/model-8b.txt | tr '\n' ' ')"
nvidia-smi dmon -s pucv -d 5 -o T > $A/dmon.txt 2>&1 &
DMON=$!
export BENCHHUB_HOME=$H
{ python3 -m benchhub_agent --version; python3 -m benchhub_agent doctor --backend cuda; echo "doctor rc=$?"; } > $A/agent-info.txt 2>&1
run_agent() {
  local name=$1
  log "$name start"
  local t0=$(date +%s)
  python3 -m benchhub_agent run $M --backend cuda \
      --variant upstream=$BIN --variant 01=$BIN --variant 01+02=$BIN \
      --no-upload --yes --json > $A/$name.json 2> >(python3 $K/ts.py $A/$name.stderr)
  local rc=$?
  sleep 1
  log "$name end rc=$rc seconds=$(( $(date +%s) - t0 ))"
  local dir=$(ls -td $H/data/results/*/ 2>/dev/null | head -1)
  cp $dir/payload.json $A/$name-payload.json 2>/dev/null
  tar czf $A/$name-logs.tgz -C $dir logs 2>/dev/null
}
run_agent run1
run_agent run2
kill $DMON
log "driver done"
touch $A/DONE
