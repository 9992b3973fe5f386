#!/usr/bin/env bash
# The checks that need a GPU, as one short script for a lent GPU machine (no package registry
# there, so the binaries travel with their shared libraries).
#
#   bench/gpu_check.sh bundle [BUILD_DIR]   here: bench/gpu_bundle.sh (→ .gpu/bundle.tar.gz)
#   bench/gpu_check.sh run [OUT_DIR]        there: unpack .gpu/bundle.tar.gz and run the checks;
#                                           logs, gpu_check.json and gpu_check.txt into OUT_DIR
#   bench/gpu_check.sh peer [OUT_DIR]       there, after `run`: step 5 alone (a rerun of it);
#                                           here, PARITY_PEER_FLAGS=--smoke checks its wiring
#
# What it checks (570 s at most, GPU_CHECK_SECONDS; each stage gets what is left of that):
#   1. the driver and the GPU as nvidia-smi sees them;
#   2. worker_unit_test with a GPU present (DeviceInventoryTest.GpusReportNameAndMemory runs
#      only there) and `parity-worker --list-devices`;
#   3. the CUDA backend's op parity test, kernels_cuda_ops_test, with PARITY_REQUIRE_GPU=1 (a
#      skip is a failure there);
#   3c. NCCL at world size 1 (`gpu_engine_check.py nccl`, 90 s at most from the budget, skipped
#      and said so when it is gone): parity-train --device cuda --rank 0 --world-size 1
#      --rendezvous-listen 127.0.0.1 (rank 0 hosts the rendezvous, one-rank NCCL sums every
#      step) against the same run without a communicator: the curve and final validation BPC bit
#      for bit, the run trains, its summary names "nccl". It prints that NCCL ran at world size 1
#      only: the lent machine has one GPU and NCCL cannot put two ranks on one GPU;
#   4. bench/gpu_engine_check.py: 50-step fp32 training of micro dense and micro MoE with
#      parity-train --device cpu and --device cuda, train_bpc compared step by step (1e-4
#      relative), 3c's result merged, and one larger dense run on CUDA for throughput (by 300 s);
#   3b. the op parity test under compute-sanitizer memcheck and racecheck if the machine has it;
#   5. the PyTorch peer (bench/gpu_torch_peer.py, 210 s at most): the 2B study's dense 1C baseline
#      and its r_a ~ 20% MoE in PyTorch bf16, eager and torch.compile (tokens/s, MFU, peak
#      memory, compile time) and the bf16 GEMM ceiling at their shapes; then
#      bench/gpu_study_cost.py merges them into gpu_check.json/.txt with the H200-hours of the
#      243-run study at those speeds (an extrapolation). Its result does not change the exit
#      status, which is the correctness checks' (1-4).
set -uo pipefail
cd "$(dirname "$0")/.."
mode="${1:-}"

# peer OUT BUNDLE SECONDS: step 5 (the plan from the bundled CLI, else the copy planned at
# bundle time). PyTorch runs with the machine's own library path, not the bundle's libraries.
peer() {
  local out="$1" b="$2" seconds="$3" plan="$1/plan_full_study_2b.json"
  echo "== PyTorch peer (${seconds} s at most)"
  if ! LD_LIBRARY_PATH="$b/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$b/bin/parity" plan \
    examples/full_study_2b.yaml --format json >"$plan" 2>"$out/plan.log"; then
    echo "parity plan failed there ($(tail -1 "$out/plan.log")); using the bundle's plan"
    cp "$b/plan_full_study_2b.json" "$plan"
  fi
  local host_ld="${PARITY_HOST_LD_LIBRARY_PATH-${LD_LIBRARY_PATH:-}}"
  env LD_LIBRARY_PATH="$host_ld" timeout "$((seconds + 15))" python3 bench/gpu_torch_peer.py \
    --plan "$plan" --out "$out/torch_peer.json" --budget "$seconds" ${PARITY_PEER_FLAGS:-} \
    >"$out/torch_peer.log" 2>&1
  stage torch_peer "$?"
  cut -c1-400 "$out/torch_peer.log"
  env LD_LIBRARY_PATH="$host_ld" python3 bench/gpu_study_cost.py "$plan" "$out/torch_peer.json" "$out"
}
stage() { echo "$1=$2" >>"$out/stages.txt"; }

case "$mode" in
  peer)
    out="${2:-${OUT:-gpu-check-out}}"
    out="$(cd "$out" && pwd)" || exit 1
    [ -d .gpu/bundle ] || tar -C .gpu -xzf .gpu/bundle.tar.gz || exit 1
    peer "$out" "$PWD/.gpu/bundle" 210 2>&1 | tee -a "$out/gpu_check.log"
    ;;
  bundle)
    exec bench/gpu_bundle.sh "${2:-build}"
    ;;
  run)
    out="${2:-${OUT:-gpu-check-out}}"
    mkdir -p "$out"
    out="$(cd "$out" && pwd)"
    start="$(date +%s)"
    deadline=$((start + ${GPU_CHECK_SECONDS:-570}))
    left() { echo $((deadline - $(date +%s))); }
    # budget SECONDS: a stage's timeout, capped by what is left (0: skip the stage)
    budget() {
      local l
      l=$(($(left) - 60))
      if [ "$l" -lt 10 ]; then echo 0; elif [ "$l" -lt "$1" ]; then echo "$l"; else echo "$1"; fi
    }
    rm -rf .gpu/bundle && tar -C .gpu -xzf .gpu/bundle.tar.gz || exit 1
    b="$PWD/.gpu/bundle"
    # PyTorch's NVIDIA wheels carry cudart, cuBLAS, cuDNN and NCCL: nvidia/<name>/lib.
    nv="$(python3 -c 'import glob, site
dirs = []
for sp in site.getsitepackages() + [site.getusersitepackages()]:
    dirs += sorted(glob.glob(sp + "/nvidia/*/lib")) + sorted(glob.glob(sp + "/nvidia/*/lib64"))
print(":".join(dirs))' 2>/dev/null)"
    export PARITY_HOST_LD_LIBRARY_PATH="${LD_LIBRARY_PATH:-}"
    export LD_LIBRARY_PATH="$b/lib${nv:+:$nv}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH" >"$out/env.txt"
    # Where the CUDA libraries resolve (and anything missing), for the log.
    ldd "$b/bin/kernels_cuda_ops_test" "$b/bin/parity-train" |
      grep -E 'not found|libcu|libnccl|^/' >"$out/ldd.txt" 2>&1
    : >"$out/stages.txt"
    {
      echo "== nvidia-smi"
      nvidia-smi --query-gpu=name,memory.total,driver_version,compute_cap --format=csv,noheader |
        tee "$out/nvidia-smi.txt"
      stage nvidia_smi "${PIPESTATUS[0]}"

      echo "== worker_unit_test, parity-worker --list-devices"
      fake="$(cat "$b/fake_engine_path")"
      if [ ! -x "$fake" ]; then mkdir -p "$(dirname "$fake")" && cp "$b/bin/parity_fake_engine" "$fake"; fi
      filter='*'
      command -v promtool >/dev/null || filter='-WorkerMetricsTest.DevicesAndSchedulerCallsAreCounted'
      status=0
      timeout "$(budget 60)" "$b/bin/worker_unit_test" --gtest_color=no --gtest_filter="$filter" \
        >"$out/worker_unit_test.log" 2>&1 || status=1
      tail -3 "$out/worker_unit_test.log"
      timeout 20 "$b/bin/parity-worker" --list-devices --threads 16 || status=1
      stage worker_checks "$status"

      echo "== kernels_cuda_ops_test"
      PARITY_REQUIRE_GPU=1 timeout "$(budget 150)" "$b/bin/kernels_cuda_ops_test" --gtest_color=no \
        --gtest_output="json:$out/cuda_ops_test.json" >"$out/cuda_ops_test.log" 2>&1
      stage op_test "$?"
      grep -E '^\[  (PASSED|FAILED|SKIPPED) ' "$out/cuda_ops_test.log" | head -20
    } 2>&1 | tee "$out/gpu_check.log"

    # 3c. NCCL at world size 1 (its result joins gpu_check.json in step 4): bounded by the
    # budget, and skipped, saying so, when the budget is gone.
    t="$(budget 90)"
    if [ "$t" -gt 0 ]; then
      echo "== NCCL at world size 1 (${t} s at most)" | tee -a "$out/gpu_check.log"
      timeout "$t" python3 bench/gpu_engine_check.py nccl "$b" "$out" "$(($(date +%s) + t - 5))" \
        2>&1 | tee -a "$out/gpu_check.log"
      stage nccl_world1 "${PIPESTATUS[0]}"
    else
      stage nccl_world1 "skipped: $(left) s left"
      echo "== NCCL at world size 1: skipped, $(left) s left of the budget" | tee -a "$out/gpu_check.log"
    fi

    # 4. training comparison and throughput (needs the most time; before the sanitizers).
    python3 bench/gpu_engine_check.py "$b" "$out" "$((start + 300))" 2>&1 |
      tee -a "$out/gpu_check.log"
    status="${PIPESTATUS[0]}"

    # 3b. sanitizers, 45 s each at most (reported in the log and stages.txt only).
    san="$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)"
    if [ -n "$san" ]; then
      for tool in memcheck racecheck; do
        t="$(budget 45)"
        [ "$t" -gt 0 ] && [ "$(left)" -gt 250 ] || break
        PARITY_REQUIRE_GPU=1 timeout "$t" "$san" --tool "$tool" --error-exitcode 99 \
          "$b/bin/kernels_cuda_ops_test" --gtest_color=no \
          --gtest_filter='*Attention*:*Routing*:*Route*:*Embedding*:*RmsNorm*:*PermuteAndCombine*' \
          >"$out/sanitizer_$tool.log" 2>&1
        stage "sanitizer_$tool" "$?"
        tail -4 "$out/sanitizer_$tool.log" | tee -a "$out/gpu_check.log"
      done
    else
      stage sanitizer "absent"
    fi

    # 5. the PyTorch peer and the study's cost, in what is left (at most 210 s).
    t=$(($(left) - 25))
    [ "$t" -gt 210 ] && t=210
    if [ "$t" -ge 60 ]; then
      peer "$out" "$b" "$t" 2>&1 | tee -a "$out/gpu_check.log"
    else
      stage torch_peer "skipped: ${t} s left"
      python3 bench/gpu_study_cost.py "$b/plan_full_study_2b.json" "$out/torch_peer.json" "$out" \
        >>"$out/gpu_check.log" 2>&1
    fi
    cat "$out/stages.txt" | tee -a "$out/gpu_check.log"
    echo "== gpu_check status=$status ($(($(date +%s) - start)) s)" | tee -a "$out/gpu_check.log"
    exit "$status"
    ;;
  *)
    sed -n '2,30p' "$0"
    exit 2
    ;;
esac
