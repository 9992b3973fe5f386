#!/usr/bin/env bash
# The whole test suite: installs what is missing, builds, and runs every test with ctest.
# Tests that need PostgreSQL start their own throwaway cluster; nothing else must be running.
#   deploy/test.sh [ctest arguments…]   e.g. deploy/test.sh -L core
set -euo pipefail
cd "$(dirname "$0")/.."
deploy/setup.sh
dir="${PARITY_BUILD_DIR:-build}"
ctest --test-dir "$dir" --output-on-failure --timeout 900 -j 2 "$@"
