#!/usr/bin/env bash
# The wiring of bench/gpu_engine_check.py's CPU-against-GPU training comparison on a machine
# without a GPU: the same comparison with two CPU runs (all threads against one). The dense run
# must agree step by step within REL_TOL; the MoE run must report where its routing first differs
# (or that it never did), compare tightly only before it, and bound its final losses.
#   bench/gpu_engine_check_smoke.sh PARITY_TRAIN
set -euo pipefail
cd "$(dirname "$0")/.."
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
. bench/gpu_smoke_bundle.sh
cpu_smoke_bundle "$1" "$tmp" 20000  # 1.4 MB: micro-moe's unique tokens fit its training split
PARITY_ENGINE_CHECK_PEER=cpu python3 - "$tmp/bundle" "$tmp/out" <<'PY'
import json, os, sys, time
sys.path.insert(0, "bench")
import gpu_engine_check as g
bundle, out = sys.argv[1], sys.argv[2]
corpus = os.path.join(bundle, "data", "kjv.txt")
deadline = time.time() + 240
results = {}
for name in ("micro_dense", "micro_moe"):
    results[name] = g.compare(bundle, out, corpus, os.path.join("kernels", "examples", name + ".json"),
                              name.replace("_", "-"), deadline)
    print(json.dumps({k: v for k, v in results[name].items() if k not in ("cpu", "cuda")}))
dense, moe = results["micro_dense"], results["micro_moe"]
assert dense["pass"] and dense["steps_compared"] == g.STEPS, dense
assert "routing_diverged_at_step" in moe and "final_rel_diff" in moe, moe
assert moe["pass"], moe
if moe["routing_diverged_at_step"] is not None:
    assert moe["steps_compared"] < g.STEPS, "nothing past the divergence is compared tightly"
print("PASS: dense step by step; MoE routing first differs at step",
      moe["routing_diverged_at_step"], "final rel diff", moe["final_rel_diff"])
PY
