#!/usr/bin/env bash
# The checks that need a GPU, as one short script for a lent GPU machine (no package registry
# there, so the binaries travel with their shared libraries).
#
#   bench/gpu_check.sh bundle [BUILD_DIR]   here: bench/gpu_bundle.sh (→ .gpu/bundle.tar.gz)
#   bench/gpu_check.sh run [OUT_DIR]        there: unpack .gpu/bundle.tar.gz and run the checks;
#                                           logs, gpu_check.json and gpu_check.txt into OUT_DIR
#   bench/gpu_check.sh peer [OUT_DIR]       there, after `run`: step 5 alone (a rerun of it);
#                                           here, PARITY_PEER_FLAGS=--smoke checks its wiring
#   bench/gpu_check.sh preflight [BIN_DIR]  anywhere, in seconds: names every missing piece (the
#                                           GPU, a CUDA library a binary needs, python3); exit 3
#                                           when one the checks need is missing. BIN_DIR: the
#                                           unpacked bundle's bin/ (default) or a build directory
#
# What it checks, in this order (420 s at most from its start, GPU_CHECK_SECONDS; every stage's
# deadline comes from that one budget: a stage gets at most its cap, capped by what is left less a
# reserve of 60 s for the stages after it, and is skipped — recorded so, never run unbounded —
# when under 10 s are left for it; stages.txt has every stage's exit status and seconds). The
# seconds after each stage are the expected cost on an H200 with 16 cores, then the cap:
#   0. the preflight above (the CUDA libraries resolved through the bundle, the PyTorch wheels'
#      nvidia/*/lib folders and torch/lib as the fallback): it stops the check in seconds, with
#      the reason, when something is missing;                                          ~2 s
#   1. the driver and the GPU as nvidia-smi sees them;                                   ~1 s
#   2. worker_unit_test with a GPU present (DeviceInventoryTest.GpusReportNameAndMemory runs
#      only there) and `parity-worker --list-devices`;                        ~12 s (45 + 20)
#   3. the CUDA backend's op parity test, kernels_cuda_ops_test, with PARITY_REQUIRE_GPU=1 (a
#      skip is a failure there): every op of the fp32 table and of the bf16 table (against fp32
#      within bf16 tolerance; the report counts the bf16 tests apart), and cuDNN's fused
#      attention called directly (a cuDNN refusal fails it; its first plans compile with NVRTC,
#      a few seconds);                                                              ~60 s (120)
#   4. bench/gpu_engine_check.py's training checks, each its own stage engine_<part> (its header
#      has each part's checks and tolerances), micro models from kernels/examples, every spec
#      with an explicit training.precision (unset would be bf16 on CUDA):
#      fp32_dense, fp32_moe: 50 steps fp32, --device cpu against cuda, train_bpc step by step
#        within 5e-4 (MoE up to the first step whose expert loads differ, that step reported,
#        then its final losses within 1e-2);                                  ~8 + ~10 s (60 each)
#      bf16_emulation: micro dense bf16 on CUDA against the CPU's bf16 emulation, 50 steps, step
#        by step within 2e-3 to step 20, 1e-2 after;                                ~10 s (60)
#      bf16_vs_fp32: 200 steps bf16 against fp32 on CUDA, every window of 20 steps within 3%
#        (MoE 5%, if time);                                                         ~20 s (60)
#      bf16_repeat: two bf16 MoE runs bit-identical (metrics, checkpoints), and one stopped at
#        step 25 and resumed ends byte-identical to them;                           ~12 s (45)
#      graphs: micro dense bf16, 4 micro-batches a step, eager against --graphs (each micro-batch
#        replayed from one recorded CUDA graph): bit-identical metrics and checkpoints, and
#        both speeds;                                                               ~10 s (40)
#   3c. NCCL at world size 1 (`gpu_engine_check.py nccl`): parity-train --device cuda --rank 0
#      --world-size 1 --rendezvous-listen 127.0.0.1 (rank 0 hosts the rendezvous, one-rank NCCL
#      sums every step) against the same run without a communicator, fp32: the curve and final
#      validation BPC bit for bit, the run trains, its summary names "nccl". It prints that NCCL
#      ran at world size 1 only: the lent machine has one GPU and NCCL cannot put two ranks on
#      one GPU. After step 4's checks, so that a hung NCCL cannot take their time;  ~10 s (60)
#   4t. engine_throughput: dense d512 L8 S1024 on CUDA in fp32 and bf16 (tokens/s, counted
#      model FLOP/s, MFU against 989 TFLOP/s, peak device memory beside the planner's estimate,
#      the last step's time split by kind of work; micro scale, not the 2B shapes);  ~25 s (60)
#   4s. engine_study_throughput: the engine in bf16 at the 2B study's shapes, the peer's two runs
#      (dense 1C baseline, MoE nearest r_a 20%) from the bundle's plan, 35 s each at most: one
#      micro-batch of the peer's 8 sequences a step (PARITY_STUDY_MICRO_BATCH=plan: the plan's),
#      5 steps (2 warm-up, 2 timed, 1 profiled); tokens/s, MFU,
#      peak memory against the estimate, the targets (MFU >= 40% dense, >= 25% MoE; memory
#      within 15%) met or not. The host draws a model's weights (~40 ns of CPU a parameter,
#      over the cores) and checkpoints them, so each run keeps the plan's per-layer shape at the
#      most layers that fit its cap (said so, with the full-depth equivalent at constant MFU); a timeout is a result.
#      Then the report: the op test, every part and 3c into gpu_check.json/.txt (its exit status
#      is the check's);                                                              ~60 s (75)
#   3b. the op parity test under compute-sanitizer memcheck and racecheck if the machine has it,
#      each only while over 200 s are left (the peer keeps 130 s or more);  ~30 s, memcheck
#      alone in the expected case (45 each)
#   5. the PyTorch peer (bench/gpu_torch_peer.py, what is left less 25 s, at most 210, at least
#      60): the 2B study's dense 1C baseline and its r_a ~ 20% MoE in PyTorch bf16, eager and
#      torch.compile (tokens/s, MFU, peak memory, compile time), the bf16 GEMM ceiling at
#      their shapes and PyTorch's fused causal SDPA at the dense attention shape (beside the
#      engine's attention from its profiled 2B-shape step); then bench/gpu_study_cost.py merges
#      them into gpu_check.json/.txt with the
#      H200-hours of the 222-run study at those speeds (an extrapolation), beside the engine's
#      micro-scale fp32 and bf16 figures and its 2B-shape ones: the ratios the targets name
#      (engine bf16 tokens/s >= 1.0x PyTorch compile dense, >= 1.5x eager MoE), met or not. Its
#      result does not change the exit status, which is the correctness checks' (1-4, 3c).
#                                                                                 ~150 s (210)
# Expected: ~220 s to the report, memcheck to ~250 s, the peer in the ~140 s left; every stage
# at its cap would leave the later engine parts skipped (NOT RUN in the report: not a pass), and
# never run past 420 s.
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
# stage NAME STATUS [SECONDS]: one line of stages.txt.
stage() { echo "$1=$2${3:+ ${3}s}" >>"$out/stages.txt"; }

# nvidia_lib_dirs: the PyTorch wheels' CUDA library folders (nvidia/<name>/lib, torch/lib last).
nvidia_lib_dirs() {
  python3 -c 'import glob, site
dirs = []
for sp in site.getsitepackages() + [site.getusersitepackages()]:
    dirs += sorted(glob.glob(sp + "/nvidia/*/lib")) + sorted(glob.glob(sp + "/nvidia/*/lib64"))
for sp in site.getsitepackages() + [site.getusersitepackages()]:
    dirs += sorted(glob.glob(sp + "/torch/lib"))
print(":".join(dirs))' 2>/dev/null
}

# preflight BINARY...: every piece the checks need (the GPU, python3, the binaries and every
# library they link), each missing one named; 3 if any is missing.
preflight() {
  local missing=0 f lib
  if ! command -v nvidia-smi >/dev/null; then
    echo "preflight: missing: nvidia-smi (no NVIDIA driver here: this machine cannot run the check)"
    missing=1
  elif ! nvidia-smi --query-gpu=name --format=csv,noheader >/dev/null 2>&1; then
    echo "preflight: missing: a GPU (nvidia-smi lists none: $(nvidia-smi -L 2>&1 | head -1))"
    missing=1
  fi
  command -v python3 >/dev/null || { echo "preflight: missing: python3"; missing=1; }
  for f in "$@"; do
    if [ ! -x "$f" ]; then
      echo "preflight: missing: $f (build with CUDA, then bench/gpu_check.sh bundle)"
      missing=1
      continue
    fi
    for lib in $(ldd "$f" 2>/dev/null | awk '/not found/ {print $1}'); do
      echo "preflight: missing: $lib, which $(basename "$f") needs (not in the bundle, the" \
        "PyTorch wheels' nvidia/*/lib folders, torch/lib or the system's library path)"
      missing=1
    done
  done
  python3 -c 'import torch' 2>/dev/null ||
    echo "preflight: note: no PyTorch here: step 5 (the peer) will be skipped"
  # cuDNN compiles its fused-attention kernels with NVRTC, which it loads itself (dlopen), so ldd
  # cannot see it: without it cuDNN attention declines and the tensor-core kernels run instead.
  local nvrtc=""
  for f in ${LD_LIBRARY_PATH//:/ } /usr/local/cuda/lib64 /usr/lib/x86_64-linux-gnu; do
    ls "$f"/libnvrtc.so.* >/dev/null 2>&1 && { nvrtc="$f"; break; }
  done
  [ -n "$nvrtc" ] || ldconfig -p 2>/dev/null | grep -q 'libnvrtc\.so' || echo "preflight: note:" \
    "no libnvrtc.so here: cuDNN attention will decline, attention runs on the tensor-core kernels"
  [ "$missing" -eq 0 ] && echo "preflight: every piece found"
  return $((missing * 3))
}

case "$mode" in
  preflight)
    bin="${2:-.gpu/bundle/bin}"
    nv="$(nvidia_lib_dirs)"
    case "$bin" in */bin) lib="${bin%/bin}/lib" ;; *) lib="$bin" ;; esac
    export LD_LIBRARY_PATH="$lib${nv:+:$nv}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    # A bundle's bin/ holds the binaries side by side; a build directory in their rooms.
    if [ -d "$bin/kernels" ]; then
      preflight "$bin/kernels/cuda/kernels_cuda_ops_test" "$bin/kernels/parity-train" \
        "$bin/kernels/cuda/libparity_cuda.so" "$bin/worker/tests/worker_unit_test" \
        "$bin/worker/parity-worker"
    else
      preflight "$bin/kernels_cuda_ops_test" "$bin/parity-train" "$bin/libparity_cuda.so" \
        "$bin/worker_unit_test" "$bin/parity-worker"
    fi
    exit $?
    ;;
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
    deadline=$((start + ${GPU_CHECK_SECONDS:-420}))
    left() { echo $((deadline - $(date +%s))); }
    # budget SECONDS [RESERVE]: a stage's timeout — SECONDS, capped by what is left less RESERVE
    # (default 60: the stages after it); 0 when under 10 s: the stage is skipped, never given
    # `timeout 0`, which would mean no limit.
    budget() {
      local l
      l=$(($(left) - ${2:-60}))
      if [ "$l" -lt 10 ]; then echo 0; elif [ "$l" -lt "$1" ]; then echo "$l"; else echo "$1"; fi
    }
    # timed NAME SECONDS CMD...: CMD under `timeout` within the budget, its status and seconds in
    # stages.txt; skipped (and said so) when its time is gone. Returns CMD's status (0 skipped).
    timed() {
      local name="$1" t t0 status
      t="$(budget "$2")"
      shift 2
      if [ "$t" -eq 0 ]; then
        stage "$name" "skipped: $(left) s left of the budget"
        echo "== $name: skipped, $(left) s left of the budget"
        return 0
      fi
      t0="$(date +%s)"
      timeout "$t" "$@"
      status=$?
      stage "$name" "$status" "$(($(date +%s) - t0))"
      return "$status"
    }
    rm -rf .gpu/bundle && tar -C .gpu -xzf .gpu/bundle.tar.gz || exit 1
    b="$PWD/.gpu/bundle"
    # PyTorch's NVIDIA wheels carry cudart, cuBLAS, cuDNN and NCCL: nvidia/<name>/lib, then
    # torch/lib as the fallback.
    nv="$(nvidia_lib_dirs)"
    export PARITY_HOST_LD_LIBRARY_PATH="${LD_LIBRARY_PATH:-}"
    export LD_LIBRARY_PATH="$b/lib${nv:+:$nv}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH" >"$out/env.txt"
    # Where the CUDA libraries resolve (and anything missing), for the log.
    ldd "$b/bin/kernels_cuda_ops_test" "$b/bin/libparity_cuda.so" |
      grep -E 'not found|libcu|libnccl|^/' >"$out/ldd.txt" 2>&1
    : >"$out/stages.txt"
    # 0. The preflight: seconds, not the budget, when a piece is missing.
    preflight "$b/bin/kernels_cuda_ops_test" "$b/bin/parity-train" "$b/bin/libparity_cuda.so" \
      "$b/bin/worker_unit_test" "$b/bin/parity-worker" | tee "$out/preflight.txt"
    if [ "${PIPESTATUS[0]}" -ne 0 ]; then
      stage preflight 3 "$(($(date +%s) - start))"
      echo "== gpu_check stopped by the preflight ($(($(date +%s) - start)) s): see above" |
        tee -a "$out/preflight.txt"
      exit 3
    fi
    stage preflight 0 "$(($(date +%s) - start))"
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
      timed worker_unit_test 45 "$b/bin/worker_unit_test" --gtest_color=no \
        --gtest_filter="$filter" >"$out/worker_unit_test.log" 2>&1
      tail -3 "$out/worker_unit_test.log"
      timed list_devices 20 "$b/bin/parity-worker" --list-devices --threads 16

      echo "== kernels_cuda_ops_test"
      PARITY_REQUIRE_GPU=1 timed op_test 120 "$b/bin/kernels_cuda_ops_test" --gtest_color=no \
        --gtest_output="json:$out/cuda_ops_test.json" >"$out/cuda_ops_test.log" 2>&1
      grep -E '^\[  (PASSED|FAILED|SKIPPED) ' "$out/cuda_ops_test.log" | head -20
    } 2>&1 | tee "$out/gpu_check.log"

    # engine_part NAME CAP: gpu_engine_check.py's part NAME as its own stage (its header has
    # what each part checks and its expected seconds), within CAP seconds and the budget's
    # deadline (`timeout` a little past it as the backstop); skipped, and said so, when the
    # budget is gone (the report then counts it NOT RUN: not a pass).
    engine_part() {
      local name="$1" t t0
      t="$(budget "$2")"
      if [ "$t" -gt 0 ]; then
        t0="$(date +%s)"
        echo "== engine: $name (${t} s at most)" | tee -a "$out/gpu_check.log"
        timeout "$((t + 10))" python3 bench/gpu_engine_check.py part "$name" "$b" "$out" \
          "$((t0 + t))" 2>&1 | tee -a "$out/gpu_check.log"
        stage "engine_$name" "${PIPESTATUS[0]}" "$(($(date +%s) - t0))"
      else
        stage "engine_$name" "skipped: $(left) s left of the budget"
        echo "== engine: $name skipped, $(left) s left of the budget" | tee -a "$out/gpu_check.log"
      fi
    }
    # 4. the engine's training checks, the most decisive first: fp32 against the CPU, bf16
    # against the CPU's emulation, bf16 against fp32, determinism and resume.
    engine_part fp32_dense 60
    engine_part fp32_moe 60
    engine_part bf16_emulation 60
    engine_part bf16_vs_fp32 60
    engine_part bf16_repeat 45
    engine_part graphs 40

    # 3c. NCCL at world size 1 (its result joins gpu_check.json in the report): bounded by the
    # budget, and skipped, saying so, when the budget is gone.
    t="$(budget 60)"
    if [ "$t" -gt 0 ]; then
      echo "== NCCL at world size 1 (${t} s at most)" | tee -a "$out/gpu_check.log"
      t0="$(date +%s)"
      timeout "$t" python3 bench/gpu_engine_check.py nccl "$b" "$out" "$(($(date +%s) + t - 5))" \
        2>&1 | tee -a "$out/gpu_check.log"
      stage nccl_world1 "${PIPESTATUS[0]}" "$(($(date +%s) - t0))"
    else
      stage nccl_world1 "skipped: $(left) s left"
      echo "== NCCL at world size 1: skipped, $(left) s left of the budget" | tee -a "$out/gpu_check.log"
    fi

    # 4, then: the engine's speed (measurements, not checks) at the micro shape and at the 2B
    # study's, and the report, which merges the parts and 3c into gpu_check.json/.txt; its exit
    # status is the check's.
    engine_part throughput 60
    engine_part study_throughput 75
    echo "== engine report" | tee -a "$out/gpu_check.log"
    python3 bench/gpu_engine_check.py report "$b" "$out" 2>&1 | tee -a "$out/gpu_check.log"
    status="${PIPESTATUS[0]}"

    # 3b. sanitizers, 45 s each at most (reported in the log and stages.txt only).
    san="$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)"
    if [ -n "$san" ]; then
      for tool in memcheck racecheck; do
        # Only while the peer keeps its time: 200 s left less 45 at most leaves it 130 s.
        [ "$(left)" -gt 200 ] || { stage "sanitizer_$tool" "skipped: $(left) s left"; continue; }
        PARITY_REQUIRE_GPU=1 timed "sanitizer_$tool" 45 "$san" --tool "$tool" --error-exitcode 99 \
          "$b/bin/kernels_cuda_ops_test" --gtest_color=no \
          --gtest_filter='*Attention*:*Routing*:*Route*:*Embedding*:*RmsNorm*:*PermuteAndCombine*' \
          >"$out/sanitizer_$tool.log" 2>&1
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
    sed -n '2,/^set -uo/{/^set -uo/!p}' "$0"
    exit 2
    ;;
esac
