#!/usr/bin/env bash
# Orchestration overhead per run: the wall time of a sweep of 50 very short runs on one worker
# that runs one at a time, minus the sum of the engine's own wall times, divided by 50. What is
# left is leasing, spawning parity-train and loading its corpus, metric forwarding, heartbeats,
# checkpoints and completion. Brings up a private stack in a temporary directory and removes it.
#
#   bench/orchestration/overhead.sh [BUILD_DIR]
set -euo pipefail
cd "$(dirname "$0")/../.."
build="${1:-build}"
dir="$(mktemp -d /tmp/parity-orchestration-XXXXXX)"
port=50171
pg_port=54371
trap 'deploy/local/down.sh --dir "$dir" >/dev/null 2>&1 || true; rm -rf "$dir"' EXIT
deploy/local/up.sh --dir "$dir" --build-dir "$build" --workers 1 --threads 1 --port "$port" \
  --pg-port "$pg_port" >"$dir/up.log" || { cat "$dir/up.log" >&2; exit 1; }
export PARITY_SCHEDULER="127.0.0.1:$port" PARITY_TOKEN_FILE="$dir/admin.token"
# The stack's PostgreSQL takes only the password in its passfile (deploy/local/up.sh).
export PGPASSFILE="$dir/pgpass"
sweep_id=$("$build/cli/parity" submit bench/orchestration/short_runs.yaml | awk '{print $2}')
"$build/cli/parity" watch "$sweep_id" >/dev/null
psql="/usr/lib/postgresql/15/bin/psql -h 127.0.0.1 -p $pg_port -U postgres -d parity -tA -F ' '"
eval "$psql" <<SQL
SELECT 'runs', count(*),
       'succeeded', count(*) FILTER (WHERE r.state = 'SUCCEEDED'),
       'sweep_wall_s', round(extract(epoch FROM s.ended_at - s.created_at)::numeric, 3),
       'engine_sum_s', round(sum(r.wall_seconds)::numeric, 3),
       'overhead_ms_per_run',
       round((1000 * (extract(epoch FROM s.ended_at - s.created_at) - sum(r.wall_seconds))
              / count(*))::numeric, 1)
FROM runs r JOIN sweeps s USING (sweep_id)
WHERE s.sweep_id = '$sweep_id'
GROUP BY s.ended_at, s.created_at;
SQL
