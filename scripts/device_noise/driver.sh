# Issue 32 device driver, detached: facts, install, model, build (mini run), probe, then two agent runs
# at the campaign defaults the probe picked (only if one is projected to stop on target), back to back.
set -u
A=/home/user/aa; K=$A/kit; H=$A/home; S=/tmp/site
MODEL=$A/model/random-llama-0.84b-IQ4_NL.gguf
TARBALL=$K/llama.cpp-0c1e570.tar.gz
log() { echo "$(date +%s) $*" >> $A/log; }
log "driver start"
[ -x /usr/local/cuda/bin/nvcc ] && export PATH=$PATH:/usr/local/cuda/bin
{ date -u; python3 -V; nvidia-smi; nproc; free -g; uname -a; cmake --version | head -1; c++ --version | head -1; } > $A/facts.txt 2>&1
python3 -m pip install -q --no-index --no-deps --no-compile --ignore-requires-python --target $S $K/wheels/*.whl > $A/pip.txt 2>&1
echo "rc=$?" >> $A/pip.txt
export PYTHONPATH=$S
BA="python3 -m benchhub_agent"
log "pip done: $(tail -1 $A/pip.txt)"
mkdir -p $A/model
tar xzf $TARBALL -C $A/model --strip-components=2 llama.cpp-0c1e570/models/ggml-vocab-llama-spm.gguf
python3 $K/make_model.py $MODEL --vocab $A/model/ggml-vocab-llama-spm.gguf > $A/model.txt 2>&1
log "model done: $(head -1 $A/model.txt)"
export BENCHHUB_HOME=$H
{ $BA --version; $BA doctor --backend cuda; } > $A/agent-info.txt 2>&1
nvidia-smi dmon -s pucv -d 5 -o T > $A/dmon.txt 2>&1 &
DMON=$!
run_agent() {  # $1 = name; rest = extra args
  local name=$1; shift
  log "$name start"
  local t0=$(date +%s.%N)
  $BA run $MODEL --backend cuda --llama-src $TARBALL --cmake-arg=-DCMAKE_CUDA_ARCHITECTURES=90 \
      --no-upload --yes --json "$@" > $A/$name.json 2> >(python3 $K/ts.py $A/$name.stderr)
  local rc=$?
  sleep 1
  local t1=$(date +%s.%N)
  log "$name end rc=$rc seconds=$(python3 -c "print(round($t1-$t0,1))")"
  return $rc
}
run_agent build --batch-sizes 1 --reps 2 --max-reps 2
BIN=$(dirname "$(ls $H/cache/bin/*/llama-batched-bench | head -1)")
log "bin $BIN"
python3 $K/probe.py $BIN $MODEL $A/probe ${PROBE_ROUNDS:-8} > $A/probe.txt 2>&1
log "probe done: $(tail -1 $A/probe.txt)"
CHOICE=$(python3 -c "import json; print(json.load(open('$A/probe/choice.json'))['choice'])")
if [ "$CHOICE" != "None" ]; then
  python3 - <<PY
import json
c = json.load(open('$A/probe/choice.json'))
import hashlib
from benchhub_protocol import campaign_versions, envelope
p = '$S/benchhub_protocol/campaigns/mv-ext-iquants/v1.json'
m = json.load(open(p)); m['sweep']['ntg'] = c['ntg']; m['sweep']['extra_args'] = c['extra_args']
# Signed again with the development campaign key (its seed is public, docs/campaigns.md): a device run only.
m['signature'] = campaign_versions.sign(m, envelope.Signer.from_seed(hashlib.sha256(b'benchhub-dev-campaign-key').digest()))
json.dump(m, open(p, 'w'), indent=2)
PY
  cp $S/benchhub_protocol/campaigns/mv-ext-iquants/v1.json $A/campaign-used.json
  run_agent run1 && run_agent run2
fi
kill $DMON
log "driver done"
touch $A/DONE
