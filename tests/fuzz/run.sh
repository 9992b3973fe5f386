#!/usr/bin/env bash
# Builds the fuzz targets with clang (PARITY_FUZZ=ON, a build directory of their own) and runs
# each on its committed corpus, failing on any crash, leak, UBSan report or timeout.
#
#   tests/fuzz/run.sh [--build-dir DIR] [--seconds N | --runs N] [TARGET…]
#     --build-dir DIR  the clang build (default build-fuzz)
#     --seconds N      run each target N seconds (default 10: the CI smoke, ctest -L fuzz)
#     --runs N         run each target for N executions instead (the long run, bench/RESULTS.md)
#     TARGET…          some targets only (default: all six)
# Environment: PARITY_JOBS (default 2), PARITY_FUZZ_CXX / PARITY_FUZZ_CC (default clang++-14 /
# clang-14, else clang++ / clang), PARITY_FUZZ_RSS_MB (default 2048), PARITY_FUZZ_FLAGS (more
# libFuzzer flags; default -entropic=0: libFuzzer 14's entropic schedule spends two thirds of
# the time on its own bookkeeping for targets that touch thousands of features per input).
# Exit status: 0 clean, 1 a target failed (its log and crash file are named), 77 no clang or
# libFuzzer runtime here (deploy/setup.sh installs clang-14 and libclang-rt-14-dev).
set -euo pipefail
src="$(cd "$(dirname "$0")/../.." && pwd)"
dir="build-fuzz"
seconds=10
runs=""
targets=()
while [ $# -gt 0 ]; do
  case "$1" in
    --build-dir) dir="$2"; shift 2 ;;
    --seconds) seconds="$2"; shift 2 ;;
    --runs) runs="$2"; shift 2 ;;
    -h|--help) sed -n '2,14p' "$0"; exit 0 ;;
    -*) echo "run.sh: unknown option '$1' (see --help)" >&2; exit 64 ;;
    *) targets+=("$1"); shift ;;
  esac
done
[ "${#targets[@]}" -gt 0 ] || targets=(spec_yaml_fuzzer spec_json_fuzzer scheduler_requests_fuzzer
                                       dashboard_api_fuzzer checkpoint_fuzzer confinement_fuzzer)
case "$dir" in /*) ;; *) dir="$PWD/$dir" ;; esac

cxx="${PARITY_FUZZ_CXX:-}"
cc="${PARITY_FUZZ_CC:-}"
if [ -z "$cxx" ]; then
  if command -v clang++-14 >/dev/null; then cxx=clang++-14; cc=clang-14; else cxx=clang++; cc=clang; fi
fi
if ! command -v "$cxx" >/dev/null || ! command -v "${cc:-clang}" >/dev/null; then
  echo "fuzz: SKIPPED: no $cxx here (deploy/setup.sh installs clang-14)"
  exit 77
fi
runtime="$("$cxx" -print-file-name=libclang_rt.fuzzer-x86_64.a)"
if [ ! -f "$runtime" ]; then
  runtime="$("$cxx" -print-resource-dir)/lib/linux/libclang_rt.fuzzer-x86_64.a"
fi
if [ ! -f "$runtime" ]; then
  echo "fuzz: SKIPPED: $cxx has no libFuzzer runtime (deploy/setup.sh installs libclang-rt-14-dev)"
  exit 77
fi

start=$(date +%s)
mkdir -p "$dir"
cmake -S "$src" -B "$dir" -G Ninja -DPARITY_FUZZ=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_COMPILER="$cxx" -DCMAKE_C_COMPILER="${cc:-clang}" >"$dir/configure.log" 2>&1 || {
  cat "$dir/configure.log"; exit 1; }
cmake --build "$dir" -j "${PARITY_JOBS:-2}" -- "${targets[@]}"
built=$(date +%s)
echo "fuzz: built ${#targets[@]} target(s) in $((built - start)) s"

# Sanitizer reports end the process (no recovery); libFuzzer reports leaks after each input.
export ASAN_OPTIONS="${ASAN_OPTIONS:-halt_on_error=1:detect_leaks=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}"
if [ -z "${ASAN_SYMBOLIZER_PATH:-}" ] && command -v llvm-symbolizer-14 >/dev/null; then
  export ASAN_SYMBOLIZER_PATH="$(command -v llvm-symbolizer-14)"
fi
limit=(-max_total_time="$seconds")
[ -z "$runs" ] || limit=(-runs="$runs")

failed=0
mkdir -p "$dir/logs" "$dir/artifacts"
for target in "${targets[@]}"; do
  corpus="$src/tests/fuzz/corpus/$target"
  scratch="$dir/corpus-new/$target"  # new inputs go here; the committed corpus is only read
  rm -rf "$scratch" "$dir/artifacts/$target-"*
  mkdir -p "$scratch"
  log="$dir/logs/$target.log"
  t0=$(date +%s)
  if "$dir/tests/fuzz/$target" "${limit[@]}" -rss_limit_mb="${PARITY_FUZZ_RSS_MB:-2048}" \
      -timeout=60 ${PARITY_FUZZ_FLAGS:--entropic=0} -print_final_stats=1 -artifact_prefix="$dir/artifacts/$target-" \
      "$scratch" "$corpus" >"$log" 2>&1; then
    status=ok
  else
    status=FAILED
    failed=1
  fi
  t1=$(date +%s)
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  speed=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
  rss=$(sed -n 's/^stat::peak_rss_mb: *//p' "$log" | tail -1)
  corp=$(grep -o 'corp: [0-9]*/[0-9]*[a-zA-Z]*' "$log" | tail -1 | sed 's/corp: //')
  echo "fuzz: $target: $status in $((t1 - t0)) s: ${execs:-?} executions, ${speed:-?} exec/s," \
       "corpus ${corp:-?}, peak RSS ${rss:-?} MB"
  if [ "$status" != ok ]; then
    echo "---- last lines of $log:"
    tail -n 60 "$log"
    ls "$dir/artifacts/$target-"* 2>/dev/null | sed 's/^/fuzz: reproducer: /' || true
  fi
done
echo "fuzz: $([ "$failed" = 0 ] && echo "all clean" || echo "FAILED") in $(( $(date +%s) - start )) s"
exit "$failed"
