#!/usr/bin/env bash
# Stops the local stack: workers first (SIGTERM: engines checkpoint, runs go back as PREEMPTED),
# then the scheduler, then PostgreSQL (pg_ctl stop -m fast). Data stays in DIR.
#   deploy/local/down.sh [--dir DIR]
set -euo pipefail
usage() { sed -n '2,5p' "$0"; }
. "$(dirname "$0")/lib.sh"
parse_args "$@"
load_stack_env

shopt -s nullglob
for f in "$dir"/pids/worker-*.pid; do
  echo "down: stopping $(basename "$f" .pid)"
  stop_pid "$f" 90 &
done
wait
if [ -f "$dir/pids/scheduler.pid" ]; then
  echo "down: stopping scheduler"
  stop_pid "$dir/pids/scheduler.pid" 30
fi
if pg_running; then
  echo "down: stopping postgres"
  as_postgres "$pg_bin/pg_ctl" -D "$dir/pg/data" -m fast -w stop >/dev/null
fi
echo "down: stopped (data kept in $dir)"
