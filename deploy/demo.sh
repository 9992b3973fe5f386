#!/usr/bin/env bash
# The main job: a study end to end on the embedded local stack. Brings up a private PostgreSQL,
# the scheduler and two CPU workers (deploy/local/up.sh, idempotent), submits the micro example
# sweep, follows it live, and prints the results table with ΔBPC against the 1C dense baseline.
# The stack stays up afterwards so the results can be explored — in the web dashboard
# (http://127.0.0.1:8080/) or a static report (`parity report`); deploy/local/down.sh stops it.
#
#   deploy/demo.sh [BUILD_DIR]        (default build/; PARITY_DEMO_SPEC overrides the spec)
set -euo pipefail
cd "$(dirname "$0")/.."
build="${1:-${PARITY_BUILD_DIR:-build}}"
spec="${PARITY_DEMO_SPEC:-examples/micro.yaml}"
stack_dir="${PARITY_STACK_DIR:-$PWD/.parity}"
port="${PARITY_DEMO_PORT:-50051}"
http_port="${PARITY_DEMO_HTTP_PORT:-8080}"
parity="$build/cli/parity"

echo "== 1/3 the plan: every run with its exact N/C/D accounting"
"$parity" plan "$spec"

echo
echo "== 2/3 the local stack: PostgreSQL, scheduler, 2 workers (state in $stack_dir)"
deploy/local/up.sh --dir "$stack_dir" --build-dir "$build" --workers 2 --port "$port" \
  --http-port "$http_port"
export PARITY_SCHEDULER="127.0.0.1:$port"
# The local stack's admin token, made at its first start (deploy/local/up.sh).
export PARITY_TOKEN_FILE="$stack_dir/admin.token"

echo
echo "== 3/3 the study: submit, follow, results"
start=$(date +%s)
set +e
"$parity" submit "$spec" --wait
code=$?
set -e
echo
echo "demo finished in $(( $(date +%s) - start )) s (exit $code)"
. "$stack_dir/stack.env"
# The newest sweep is the one just submitted (`parity status` lists newest first).
sweep_id="$("$parity" status 2>/dev/null | awk 'NR == 3 { print $1 }' || true)"
cat <<TXT

Where things are:
  dashboard         http://127.0.0.1:${http_port}/sweeps/${sweep_id}   (sign in: xdg-open "http://127.0.0.1:${http_port}/login?token=\$(cat $PARITY_TOKEN_FILE)")
  metrics           http://127.0.0.1:${metrics_port:-9464}/metrics (scheduler), workers on the next ports; Grafana: deploy/grafana/
  static report     PARITY_TOKEN_FILE=$PARITY_TOKEN_FILE $parity report ${sweep_id:-SWEEP_ID} --out report/   (then open report/index.html)
  scheduler (gRPC)  127.0.0.1:$port     e.g. PARITY_TOKEN_FILE=$PARITY_TOKEN_FILE $parity status
  database          psql "$db_url" -c 'SELECT * FROM results'
  logs              $stack_dir/logs/
  stop everything   deploy/local/down.sh --dir $stack_dir
TXT
exit "$code"
