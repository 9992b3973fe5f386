#!/usr/bin/env bash
# The web port under 200 slow clients: a private scheduler (deploy/local/up.sh, no workers) in a
# temporary directory, bench/http/slow_clients.py against its HTTP port, then everything down.
#
#   bench/http/run.sh [BUILD_DIR] [slow_clients.py flags...]
set -euo pipefail
cd "$(dirname "$0")/../.."
build="${1:-build}"
shift || true
dir="$(mktemp -d /tmp/parity-http-bench-XXXXXX)"
chmod 755 "$dir"  # the postgres user runs the cluster inside it
trap 'deploy/local/down.sh --dir "$dir" >/dev/null 2>&1 || true; rm -rf "$dir"' EXIT
deploy/local/up.sh --dir "$dir" --build-dir "$build" --workers 0 --threads 1 --port 50181 --pg-port 54381 \
  --http-port 58181 --metrics-port 59181 \
  >"$dir/up.log" || { cat "$dir/up.log" >&2; exit 1; }
# shellcheck disable=SC1091
. "$dir/stack.env"
python3 bench/http/slow_clients.py --port "$http_port" "$@"
