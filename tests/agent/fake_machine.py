"""A fake fast machine for the agent's honesty checks: per-variant bin dirs whose llama-batched-bench prints
jsonl rows at a known speed (the variant's true speedup, a per-process noise, and chosen disturbed calls),
and whose llama-completion and test-backend-ops answer as the real tools do. Every process of the machine
counts its calls in one shared state file, so "the 5th process the agent starts" can be disturbed."""

from __future__ import annotations

import json
import sys
from pathlib import Path

_BENCH = r"""#!{python}
import json, math, random, sys
config = json.load(open({config!r}))
state = {state!r}
try:
    calls = int(open(state).read())
except OSError:
    calls = 0
open(state, "w").write(str(calls + 1))
args = sys.argv[1:]
sizes = [int(s) for s in args[args.index("-npl") + 1].split(",")]
rng = random.Random(config["seed"] * 7919 + calls)
offset = rng.gauss(0.0, config["sigma"])  # one process, one offset: shared by its batch sizes
factor = config["speedup"] * math.exp(offset) * config["disturb"].get(str(calls + 1), 1.0)
for size in sizes:
    tg = config["base"] * size ** 0.8 * factor * math.exp(rng.gauss(0.0, config["row_sigma"]))
    print(json.dumps({{"n_kv_max": 4096, "n_batch": 2048, "n_ubatch": 512, "flash_attn": 1, "is_pp_shared": 0,
        "n_gpu_layers": 99, "n_threads": 2, "n_threads_batch": 2, "pp": 128, "tg": 32, "pl": size,
        "n_kv": 160 * size, "t_pp": 0.01, "speed_pp": 12800.0, "t_tg": 32 * size / tg, "speed_tg": tg,
        "t": 0.02, "speed": 8000.0}}))
"""

_COMPLETION = r"""#!/bin/sh
case "$*" in *--version*)
  echo "version: 1 (build 1, commit 0c1e570)" >&2
  echo "built with cc (GCC) 13 for x86_64-linux-gnu" >&2
  exit 0;;
esac
echo "The sea is wide and deep, and every wave that comes to shore carries sand, shells and light."
echo "llama_perf_context_print:        eval time =      10.00 ms /    96 runs   (    0.10 ms per token)" >&2
"""


def make(
    root: Path,
    speedups: dict[str, float],
    sigma: float = 0.001,
    row_sigma: float = 0.0005,
    disturb: dict[int, float] | None = None,
    base: float = 70.0,
    seed: int = 1,
) -> dict[str, Path]:
    """One bin dir per variant under root; `disturb` maps a 1-based process number (over the whole machine)
    to a factor on its speed. Returns {variant: bin_dir}."""
    root.mkdir(parents=True, exist_ok=True)
    state = root / "calls"
    dirs = {}
    for name, speedup in speedups.items():
        folder = root / name.replace("+", "_")
        folder.mkdir(parents=True, exist_ok=True)
        config = folder / "config.json"
        config.write_text(
            json.dumps(
                {
                    "speedup": speedup,
                    "sigma": sigma,
                    "row_sigma": row_sigma,
                    "disturb": {str(key): value for key, value in (disturb or {}).items()},
                    "base": base,
                    "seed": seed,
                }
            )
        )
        bench = folder / "llama-batched-bench"
        bench.write_text(_BENCH.format(python=sys.executable, config=str(config), state=str(state)))
        completion = folder / "llama-completion"
        completion.write_text(_COMPLETION)
        backend_ops = folder / "test-backend-ops"
        backend_ops.write_text("#!/bin/sh\necho 'Testing 0 devices'\nexit 0\n")
        for tool in (bench, completion, backend_ops):
            tool.chmod(0o755)
        dirs[name] = folder
    return dirs
