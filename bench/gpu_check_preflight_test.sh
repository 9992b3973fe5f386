#!/usr/bin/env bash
# bench/gpu_check.sh's preflight, the dry run a machine without a GPU can do: it must name every
# missing piece — the driver when there is none, each binary that is absent, each library a
# present binary links that resolves nowhere — exit 3, and take seconds, not the GPU budget.
#   bench/gpu_check_preflight_test.sh
set -euo pipefail
cd "$(dirname "$0")/.."
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/bin" "$tmp/lib"
# A binary that links a library which is then gone: what a bundle missing a CUDA library looks like.
echo 'int parity_missing(void) { return 0; }' | cc -shared -fPIC -x c - -o "$tmp/lib/libparitymissing.so"
echo 'int parity_missing(void); int main(void) { return parity_missing(); }' |
  cc -x c - -o "$tmp/bin/kernels_cuda_ops_test" -L"$tmp/lib" -lparitymissing
rm "$tmp/lib/libparitymissing.so"
start="$(date +%s)"
set +e
bash bench/gpu_check.sh preflight "$tmp/bin" >"$tmp/out.txt" 2>&1
status=$?
set -e
took=$(($(date +%s) - start))
cat "$tmp/out.txt"
fail() { echo "FAIL: $*"; exit 1; }
[ "$status" -eq 3 ] || fail "expected exit 3 with pieces missing, got $status"
[ "$took" -le 30 ] || fail "the preflight took ${took} s; it must take seconds"
grep -q "missing: libparitymissing.so, which kernels_cuda_ops_test needs" "$tmp/out.txt" ||
  fail "the library the binary links was not named"
for f in parity-train libparity_cuda.so worker_unit_test parity-worker; do
  grep -q "missing: $tmp/bin/$f" "$tmp/out.txt" || fail "the absent $f was not named"
done
if ! command -v nvidia-smi >/dev/null; then
  grep -q "missing: nvidia-smi" "$tmp/out.txt" || fail "no driver here, and it was not named"
fi
echo "PASS: every missing piece named in ${took} s"
