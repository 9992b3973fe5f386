#!/usr/bin/env bash
# The data-path benchmarks of RESULTS.md: training RSS against corpus size (10 MB, 1 GB, 10 GB of
# synthetic tokens) and the data loader's share of step time with and without prefetching, the
# shards read cold from disk. Writes up to ~10 GB under WORK and deletes it at the end.
#
#   bench/data/run.sh [BUILD_DIR=build] [WORK=/tmp/parity_data_bench] [SIZES="10MB 1GB 10GB"]
# Sizes: 10MB 1GB 10GB 30GB. Environment: STEPS (100), THREADS (2), EXTRA (more parity-train
# flags, e.g. "--device cuda").
set -euo pipefail
BUILD=${1:-build}
WORK=${2:-/tmp/parity_data_bench}
SIZES=${3:-"10MB 1GB 10GB"}
STEPS=${STEPS:-100}
THREADS=${THREADS:-2}
mkdir -p "$WORK"
trap 'rm -rf "$WORK"' EXIT

tokens_of() {  # bytes of 2-byte ids
  case $1 in 10MB) echo 5000000 ;; 1GB) echo 500000000 ;; 10GB) echo 5000000000 ;; 30GB) echo 15000000000 ;; *) exit 1 ;; esac
}
evict() {  # drop the dataset's pages from the page cache: the next run reads from disk
  python3 - "$1" <<'PY'
import glob, os, sys
for f in glob.glob(os.path.join(sys.argv[1], "*.tok")):
    fd = os.open(f, os.O_RDONLY)
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    os.close(fd)
PY
}
spec() {  # a small dense model over a 1024-token vocabulary, so the data path's share shows
  cat > "$WORK/run.json" <<JSON
{"name": "data-bench",
 "model": {"architecture": "ARCHITECTURE_DENSE", "dModel": 64, "numLayers": 2, "numHeads": 4,
           "numKvHeads": 4, "ffnHidden": 172, "tieEmbeddings": true, "vocabSize": 1024},
 "training": {"learningRate": 0.003, "batchTokens": 1024, "sequenceLength": 256,
              "microBatchSequences": 4, "seed": 1, "steps": $STEPS, "logEverySteps": 50,
              "evalEverySteps": 50, "evalTokens": 8192, "checkpointEverySteps": 0},
 "data": {"corpus": "$1", "reuse": "REUSE_MODE_UNIQUE"}}
JSON
}
train() {  # name, dataset, extra flags → one result line
  local name=$1 ds=$2
  shift 2
  rm -rf "$WORK/out"
  "$BUILD/kernels/parity-train" --run "$WORK/run.json" --out "$WORK/out" --threads "$THREADS" \
    --metrics "$WORK/$name.jsonl" "$@" ${EXTRA:-} > /dev/null
  python3 - "$WORK/$name.jsonl" "$name" "$(du -sb "$ds" | cut -f1)" <<'PY'
import json, sys
s = [json.loads(l) for l in open(sys.argv[1]) if '"summary"' in l][-1]
share = s["data_wait_seconds"] / s["train_seconds"]
print(f"{sys.argv[2]:<24} corpus {int(sys.argv[3]) / 1e9:8.3f} GB  peak RSS "
      f"{s['peak_memory_bytes'] / 2**20:7.1f} MiB  step {1e3 * s['train_seconds'] / s['steps']:6.1f} ms"
      f"  data wait {1e3 * s['data_wait_seconds'] / s['steps']:6.3f} ms/step ({100 * share:.2f}%)"
      f"  final_val_bpc {s['final_val_bpc']:.3f}")
PY
}

for size in $SIZES; do
  ds="$WORK/ds-$size"
  "$BUILD/bench/data/make_tokens" --out "$ds" --tokens "$(tokens_of "$size")" --vocab 1024 --evict
  spec "$ds"
  train "rss-$size" "$ds"
  evict "$ds"
  train "cold-sync-$size" "$ds" --no-prefetch
  evict "$ds"
  train "cold-prefetch-$size" "$ds"
  rm -rf "$ds"
done
