#!/usr/bin/env bash
# Quickstart command 1: install what is needed, build, and run the main job.
# The main job today: plan the micro example sweep with exact N/C/D accounting (`parity plan`),
# then train its first run on the CPU engine (`parity-train`) and print the summary.
set -euo pipefail
cd "$(dirname "$0")/.."
deploy/setup.sh
dir="${PARITY_BUILD_DIR:-build}"
exec deploy/demo.sh "$dir"
