#!/usr/bin/env bash
# The checks that need a GPU, as one short script for a lent GPU machine (no package registry
# there, so the binaries travel with their shared libraries).
#
#   bench/gpu_check.sh bundle [BUILD_DIR]   here: copy the binaries and the shared libraries they
#                                           load (all but glibc's) into .gpu/ (git-ignored)
#   bench/gpu_check.sh run [OUT_DIR]        there: run the checks from .gpu/, logs into OUT_DIR
#
# What it checks today (the engine has no CUDA backend yet; see kernels/README.md):
#   1. the driver and the GPU as nvidia-smi sees them;
#   2. worker_unit_test with a GPU present: DeviceInventoryTest.GpusReportNameAndMemory runs
#      (it skips on a machine without one) and every other worker unit test still passes;
#   3. `parity-worker --list-devices`: the devices a worker would register with the scheduler
#      (CPU threads and memory, each CUDA GPU with its name and memory), as JSON.
set -euo pipefail
cd "$(dirname "$0")/.."
mode="${1:-}"

case "$mode" in
  bundle)
    build="${2:-build}"
    rm -rf .gpu && mkdir -p .gpu/bin .gpu/lib
    cp "$build/worker/parity-worker" "$build/worker/tests/worker_unit_test" \
      "$build/worker/tests/parity_fake_engine" .gpu/bin/
    for bin in .gpu/bin/*; do
      ldd "$bin" | awk '$3 ~ /^\// {print $3}'
    done | sort -u | grep -Ev '/(libc|libm|libpthread|libdl|librt|ld-linux[^/]*)\.so' |
      while read -r lib; do cp -L "$lib" .gpu/lib/; done
    # The working tree that travels is capped (64 MiB): symbols are not needed there.
    strip --strip-unneeded .gpu/bin/* .gpu/lib/*
    # worker_unit_test finds the fake engine at the absolute path it was built with.
    realpath "$build/worker/tests/parity_fake_engine" >.gpu/fake_engine_path
    grep -qx '/.gpu/' .git/info/exclude 2>/dev/null || echo '/.gpu/' >>.git/info/exclude
    du -sh .gpu
    ;;
  run)
    out="${2:-${OUT:-gpu-check-out}}"
    mkdir -p "$out"
    export LD_LIBRARY_PATH="$PWD/.gpu/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    fake="$(cat .gpu/fake_engine_path)"
    if [ ! -x "$fake" ]; then mkdir -p "$(dirname "$fake")" && cp .gpu/bin/parity_fake_engine "$fake"; fi
    status=0
    {
      echo "== nvidia-smi"
      nvidia-smi --query-gpu=name,memory.total,driver_version,compute_cap --format=csv || status=1
      echo "== worker_unit_test"
      # promtool (48 MB) does not travel: the one test that lints with it runs in CI instead.
      filter='*'
      command -v promtool >/dev/null || filter='-WorkerMetricsTest.DevicesAndSchedulerCallsAreCounted'
      .gpu/bin/worker_unit_test --gtest_color=no --gtest_filter="$filter" || status=1
      echo "== parity-worker --list-devices"
      .gpu/bin/parity-worker --list-devices --threads 16 || status=1
      echo "== gpu_check status=$status"
    } 2>&1 | tee "$out/gpu_check.log"
    grep -q "gpu_check status=0" "$out/gpu_check.log"
    ;;
  *)
    sed -n '2,15p' "$0"
    exit 2
    ;;
esac
