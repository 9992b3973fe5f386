#!/usr/bin/env bash
# Installs every Debian package Parity needs (idempotent: only what is missing), then configures
# and builds the tree into build/. Safe to run again; a second run does almost nothing.
#
#   deploy/setup.sh            install + build (Release)
#   deploy/setup.sh --no-build install only
#   deploy/setup.sh --bench    also install the benchmark peers (PyTorch on the CPU)
# Environment: PARITY_BUILD_DIR (default build), PARITY_JOBS (default: nproc).
set -euo pipefail
cd "$(dirname "$0")/.."

build=1
bench=0
for arg in "$@"; do
  case "$arg" in
    --no-build) build=0 ;;
    --bench) bench=1 ;;
    -h|--help) sed -n '2,9p' "$0"; exit 0 ;;
    *) echo "setup.sh: unknown option '$arg' (see --help)" >&2; exit 2 ;;
  esac
done

packages=(
  build-essential cmake ninja-build pkg-config git
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler libabsl-dev
  libpqxx-dev libpq-dev postgresql
  prometheus-cpp-dev libcpp-httplib-dev libopenblas-dev nlohmann-json3-dev libcli11-dev
  libmicrohttpd-dev  # the scheduler's web port (server/api/README.md says why)
  libsentencepiece-dev  # `parity data tokenizer train` and `parity data prepare` (datasets/prepare)
  libgloo-dev  # the engine's collectives between CPU ranks (kernels/comm)
  libspdlog-dev libfmt-dev libyaml-cpp-dev libgtest-dev libgmock-dev libbenchmark-dev
  bible-kjv python3
  iproute2  # ip netns, veth, tc: the network fault test (tests/faults)
  openssl  # the TLS tests make their certificates with it
  chromium  # the dashboard's browser tests (tests/dashboard) drive it headless
  prometheus  # promtool: the deploy/ tests lint the metrics, config, alert rules and dashboard
  clang-14 libclang-rt-14-dev llvm-14  # libFuzzer, ASan/UBSan, llvm-symbolizer (tests/fuzz)
  python3-grpcio python3-protobuf python3-yaml  # the Python client (clients/python)
  python3-pandas python3-matplotlib  # optional for its users; its test draws the README figure
  python3-venv python3-setuptools python3-pip  # pip install clients/python (its ctest, offline)
)
# The build vendors the dashboard's JavaScript with npm (web/CMakeLists.txt); Debian's Node is
# enough, and a newer one already on the machine is kept.
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  packages+=(nodejs npm)
fi
if [ "$bench" = 1 ]; then
  packages+=(python3-torch python3-numpy)
fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
  sudo=""
  [ "$(id -u)" = 0 ] || sudo="sudo"
  echo "setup: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get -o DPkg::Lock::Timeout=600 update -qq
  $sudo apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends "${missing[@]}"
else
  echo "setup: all Debian packages present"
fi

# The default demo corpus: the King James Bible as plain bytes (data/kjv.txt).
if [ ! -s data/kjv.txt ] && [ -x kernels/tools/make_corpus.sh ]; then
  mkdir -p data
  kernels/tools/make_corpus.sh data/kjv.txt
fi

if [ "$build" = 1 ]; then
  dir="${PARITY_BUILD_DIR:-build}"
  jobs="${PARITY_JOBS:-$(nproc)}"
  cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
  cmake --build "$dir" -j "$jobs"
fi
