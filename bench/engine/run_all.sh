#!/bin/sh
# Runs the engine benchmarks side by side with their peers and prints JSON lines:
#   OpenBLAS sgemm at the model's sizes (2 threads, OpenBLAS's own threading), then for each model
#   the engine (engine_bench) and PyTorch (torch_peer.py), same shapes, batch, threads.
# Usage: bench/engine/run_all.sh BUILD_DIR [CORPUS] [STEPS]
set -eu
build=${1:?usage: $0 BUILD_DIR [CORPUS] [STEPS]}
corpus=${2:-/tmp/kjv.txt}
steps=${3:-15}
here=$(dirname "$0")
[ -f "$corpus" ] || "$here/../../kernels/tools/make_corpus.sh" "$corpus"
echo "# load before: $(cut -d' ' -f1-3 /proc/loadavg)"
OPENBLAS_NUM_THREADS=2 "$build/bench/engine/engine_gemm_bench" --benchmark_min_time=0.3 \
  --benchmark_format=json | /usr/bin/python3 -c '
import json, sys
runs = json.load(sys.stdin)["benchmarks"]
flops = sum(2.0 * float(r["name"].split("/")[1]) * float(r["name"].split("/")[2]) *
            float(r["name"].split("/")[3]) for r in runs[:6])
secs = sum(2.0 * float(r["name"].split("/")[1]) * float(r["name"].split("/")[2]) *
           float(r["name"].split("/")[3]) / (r["GFLOPS"] * 1e9) for r in runs[:6])
print(json.dumps({"sgemm_gflops_dense_shapes_2threads": flops / secs / 1e9,
                  "per_shape": {r["name"]: round(r["GFLOPS"], 1) for r in runs}}))'
for model in dense moe16 moe64; do
  "$build/bench/engine/engine_bench" --model "$model" --corpus "$corpus" --threads 2 --steps "$steps"
  OPENBLAS_NUM_THREADS=2 /usr/bin/python3 "$here/torch_peer.py" --model "$model" --corpus "$corpus" \
    --threads 2 --steps "$steps"
done
echo "# load after: $(cut -d' ' -f1-3 /proc/loadavg)"
