#!/usr/bin/env bash
# Data-parallel scaling of parity-train on the CPU: the same run (global batch, steps, data) on a
# gang of 1, 2 and 4 ranks on this machine, one BLAS/pool thread per rank, over loopback Gloo.
# Prints per world size: rank 0's training tokens/s, its time in collectives per step, the
# gradient bytes summed per step, the CPU seconds of all ranks together (start-up and evaluation
# included: the communicator's cost shows as CPU beyond the single process's) and the final
# validation BPC (which must agree across sizes).
#
#   bench/dp/scaling.sh [BUILD_DIR] [STEPS]      (default build, 20; CORPUS=FILE, default
#                                                 data/kjv.txt, else made with make_corpus.sh)
#
# On a machine with fewer cores than ranks the ranks share cores: tokens/s then measures the
# communicator's overhead, not scaling (bench/RESULTS.md, "Data-parallel scaling").
set -euo pipefail
build=${1:-build}
steps=${2:-20}
bin=$build/kernels/parity-train
work=$(mktemp -d /tmp/parity_dp_bench.XXXXXX)
trap 'rm -rf "$work"' EXIT
root=$(cd "$(dirname "$0")/../.." && pwd)
corpus=${CORPUS:-$root/data/kjv.txt}
if [ ! -f "$corpus" ]; then
  corpus=$work/kjv.txt
  "$root/kernels/tools/make_corpus.sh" "$corpus"
fi

cat >"$work/run.json" <<JSON
{"name":"dp-bench",
 "model":{"architecture":"ARCHITECTURE_DENSE","dModel":128,"numLayers":4,"numHeads":4,
          "numKvHeads":4,"ffnHidden":512,"tieEmbeddings":true},
 "training":{"learningRate":0.001,"batchTokens":8192,"sequenceLength":128,"steps":$steps,
             "microBatchSequences":16,"seed":1,"evalTokens":4096,"evalEverySteps":1000,
             "logEverySteps":1000,"checkpointEverySteps":0,"checkpointEverySeconds":0,
             "threads":1},
 "data":{"corpus":"$corpus","validationFraction":0.05}}
JSON

export OPENBLAS_NUM_THREADS=1
launch() {  # $1 = world size, $2 = output dir: runs the gang to its end
  local w=$1 out=$2
  if [ "$w" = 1 ]; then
    "$bin" --run "$work/run.json" --out "$out/r0" --metrics "$out/r0.jsonl" --threads 1 >/dev/null
    return
  fi
  "$bin" --run "$work/run.json" --out "$out/r0" --metrics "$out/r0.jsonl" --threads 1 \
    --rank 0 --world-size "$w" --gang-epoch 1 --rendezvous-listen 127.0.0.1 >/dev/null &
  local pids=($!) addr="" token=""
  for _ in $(seq 1 500); do
    addr=$(grep -o '"address":"[^"]*"' "$out/r0.jsonl" 2>/dev/null | head -1 | cut -d'"' -f4 || true)
    [ -n "$addr" ] && break
    sleep 0.02
  done
  # The gang's secret token, for ranks > 0 in their environment (never argv).
  token=$(grep -o '"token":"[^"]*"' "$out/r0.jsonl" 2>/dev/null | head -1 | cut -d'"' -f4 || true)
  for r in $(seq 1 $((w - 1))); do
    PARITY_RENDEZVOUS_TOKEN="$token" "$bin" --run "$work/run.json" --out "$out/r$r" --metrics "$out/r$r.jsonl" --threads 1 \
      --rank "$r" --world-size "$w" --gang-epoch 1 --rendezvous "$addr" >/dev/null &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p"; done
}

run_gang() {  # $1 = world size
  local w=$1 out=$work/w$1
  mkdir -p "$out"
  # bash's `time` counts the CPU of every child the group waited for: all ranks.
  local TIMEFORMAT='%U %S'
  { time launch "$w" "$out"; } 2>"$out/time"
  local cpu
  cpu=$(awk '{ print $1 + $2 }' "$out/time")
  python3 - "$out/r0.jsonl" "$w" "$cpu" <<'PY'
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
s = [l for l in lines if l.get("event") == "summary"][-1]
params = s["params"]
comm = s.get("comm_seconds", 0.0) / max(s["steps"], 1)
print(f"world {sys.argv[2]}: {s['tokens_per_second']:9.0f} tokens/s  "
      f"collectives {comm * 1e3:7.1f} ms/step  gradient {params * 4 / 2**20:6.2f} MiB/step  "
      f"train {s['train_seconds']:6.1f} s  CPU {float(sys.argv[3]):6.1f} s (all ranks)  "
      f"final val BPC {s['final_val_bpc']:.6f}")
PY
}

echo "$(nproc) cores; $steps steps of 8192 tokens (64 sequences of 128, micro-batches of 16)"
for w in 1 2 4; do run_gang "$w"; done
