#!/usr/bin/env bash
# Shows what of the local stack runs: PostgreSQL, the scheduler (with a health probe), workers.
#   deploy/local/status.sh [--dir DIR]      exit 0 when everything started by up.sh is running
set -uo pipefail
usage() { sed -n '2,3p' "$0"; }
. "$(dirname "$0")/lib.sh"
parse_args "$@"
load_stack_env
ok=0
if pg_running; then echo "postgres    running  127.0.0.1:$pg_port  ($dir/pg/data)"; else echo "postgres    stopped"; ok=1; fi
if pid_alive "$dir/pids/scheduler.pid"; then
  health="unhealthy"
  scheduler_healthy && health="healthy"
  echo "scheduler   running  127.0.0.1:$port  pid $(cat "$dir/pids/scheduler.pid")  $health"
  [ "$health" = healthy ] || ok=1
else
  echo "scheduler   stopped"; ok=1
fi
shopt -s nullglob
for f in "$dir"/pids/worker-*.pid; do
  name="$(basename "$f" .pid)"
  if pid_alive "$f"; then echo "$(printf '%-11s' "$name") running  pid $(cat "$f")"; else echo "$(printf '%-11s' "$name") stopped"; ok=1; fi
done
echo "logs        $dir/logs/"
exit $ok
