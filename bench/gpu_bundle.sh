#!/usr/bin/env bash
# Packs what bench/gpu_check.sh runs on a lent GPU machine into .gpu/bundle.tar.gz (git-ignored;
# it travels with the device tool's `carry: [".gpu"]`, 64 MiB at most). Run here, where the
# toolchain and the -dev libraries are: the GPU machine has no package registry, only the NVIDIA
# driver and PyTorch's CUDA wheels, so the CUDA libraries (cudart, cuBLAS, cuDNN, NCCL) stay out
# and are found there; glibc stays out too (the machine's is new enough, checked 2026-11-30).
#
#   bench/gpu_bundle.sh [BUILD_DIR]     (default build)
#   PARITY_TRAIN_BIN=path bench/gpu_bundle.sh   use that parity-train instead of building one
set -euo pipefail
cd "$(dirname "$0")/.."
build="${1:-build}"
targets=(parity-worker worker_unit_test parity_fake_engine kernels_cuda_ops_test parity parity_cuda)
train="${PARITY_TRAIN_BIN:-}"
if [ -z "$train" ]; then
  targets+=(parity-train)
  train="$build/kernels/parity-train"
fi
cmake --build "$build" -j2 --target "${targets[@]}"

stage="$(mktemp -d)"
trap 'rm -rf "$stage"' EXIT
b="$stage/bundle"
mkdir -p "$b/bin" "$b/lib" "$b/data"
cp "$build/worker/parity-worker" "$build/worker/tests/worker_unit_test" \
  "$build/worker/tests/parity_fake_engine" "$build/kernels/cuda/kernels_cuda_ops_test" "$train" \
  "$build/cli/parity" "$build/kernels/cuda/libparity_cuda.so" "$b/bin/"
for bin in "$b"/bin/*; do
  ldd "$bin" | awk '$3 ~ /^\// {print $3}'
done | sort -u | grep -Ev '/(libc|libm|libpthread|libdl|librt|ld-linux[^/]*)\.so' |
  grep -Ev '/lib(cuda|cudart|cublas|cublasLt|cudnn[^/]*|nccl)\.so' |
  while read -r lib; do cp -L "$lib" "$b/lib/"; done
strip --strip-unneeded "$b"/bin/* "$b"/lib/*
# parity-train (and the worker's) load the CUDA backend module beside themselves
# (kernels/backend/cuda_module.h): libparity_cuda.so is in bin/ for that.
# worker_unit_test finds the fake engine at the absolute path it was built with.
realpath "$build/worker/tests/parity_fake_engine" >"$b/fake_engine_path"
cp -L data/kjv.txt "$b/data/kjv.txt"  # the training comparison's corpus (data/ is git-ignored)
# The PyTorch peer's shapes and the study's runs (gpu_check.sh plans again there with the
# bundled CLI, and falls back to this copy if that fails).
"$build/cli/parity" plan examples/full_study_2b.yaml --format json >"$b/plan_full_study_2b.json"
git rev-parse HEAD >"$b/commit"

rm -rf .gpu && mkdir -p .gpu
tar -C "$stage" -czf .gpu/bundle.tar.gz bundle
size="$(stat -c %s .gpu/bundle.tar.gz)"
echo "bundle: .gpu/bundle.tar.gz, $((size / 1048576)) MiB ($(du -sm "$b" | cut -f1) MiB unpacked)"
if [ "$size" -gt $((64 * 1048576)) ]; then
  echo "bundle is over the 64 MiB that travels" >&2
  exit 1
fi
