#!/usr/bin/env bash
# The wiring of bench/gpu_check.sh's stage 3c (`gpu_engine_check.py nccl`) on a machine without a
# GPU: the same two runs with --device cpu, where a gang of one sums through Gloo. It must pass,
# name "gloo" as the communicator, and say plainly that NCCL ran at world size 1 only.
#   bench/gpu_nccl_check_smoke.sh PARITY_TRAIN
set -euo pipefail
cd "$(dirname "$0")/.."
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
. bench/gpu_smoke_bundle.sh
cpu_smoke_bundle "$1" "$tmp" 3500  # 240 KB: enough windows for training and evaluation
set +e
PARITY_NCCL_CHECK_DEVICE=cpu python3 bench/gpu_engine_check.py nccl "$tmp/bundle" "$tmp/out" \
  "$(($(date +%s) + 170))" | tee "$tmp/out/stdout.txt"
status="${PIPESTATUS[0]}"
set -e
fail() { echo "FAIL: $*"; cat "$tmp/out/nccl_check.json" 2>/dev/null; exit 1; }
[ "$status" -eq 0 ] || fail "exit $status"
grep -q '^nccl at world size 1: PASS' "$tmp/out/stdout.txt" || fail "no PASS line"
grep -q 'NCCL ran at world size 1 only: the lent machine has one GPU and NCCL cannot put two ranks on one GPU' \
  "$tmp/out/stdout.txt" || fail "the plain statement is missing"
python3 - "$tmp/out/nccl_check.json" <<'PY' || fail "nccl_check.json"
import json, sys
r = json.load(open(sys.argv[1]))
assert r["pass"] and r["communicator"] == "gloo" and r["world_size"] == 1, r
assert r["final_val_bpc"] is not None and r["final_val_bpc"] == r["final_val_bpc_plain"], r
assert r["last_train_bpc"] < r["first_train_bpc"], r
PY
echo "gpu_check stage 3c wiring: PASS"
