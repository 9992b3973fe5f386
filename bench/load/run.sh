#!/usr/bin/env bash
# The scheduler under a lab's load (bench/load/README.md): a private PostgreSQL 15 cluster in a
# temporary directory, one or two parity-scheduler processes on it, then load_gen (simulated
# workers, watchers and dashboard clients) for a fixed time; everything is stopped and deleted
# at the end, whatever happens.
#
#   bench/load/run.sh [--build-dir build] [--replicas 1|2] [--kill-at S] [--port-base 25000]
#                     [--fsync on|off] [--pool-size N] [--queries] [--keep] [-- load_gen flags...]
#
#   --replicas 2 --kill-at 60   two schedulers on the one database, the workers spread over both,
#                               the second killed with SIGKILL 60 s into the load
#   --queries                   after the load: seed a 100,000-run sweep by copying the loaded
#                               one's runs and metrics in SQL, then time listing, results and
#                               curves through the API (load_queries)
# Everything after `--` goes to load_gen (--workers 1000 --watchers 200 --dashboards 50
# --duration 120 …). Prints uptime before and after: the machine is shared.
set -euo pipefail
cd "$(dirname "$0")/../.."
build=build replicas=1 kill_at="" port_base=25000 fsync=on pool_size=16 queries=0 keep=0
while [ $# -gt 0 ]; do
  case "$1" in
    --build-dir) build="$2"; shift 2 ;;
    --replicas) replicas="$2"; shift 2 ;;
    --kill-at) kill_at="$2"; shift 2 ;;
    --port-base) port_base="$2"; shift 2 ;;
    --fsync) fsync="$2"; shift 2 ;;
    --pool-size) pool_size="$2"; shift 2 ;;
    --queries) queries=1; shift ;;
    --keep) keep=1; shift ;;
    --) shift; break ;;
    *) echo "run.sh: unknown flag $1 (load_gen's flags go after --)" >&2; exit 2 ;;
  esac
done
pg_bin="${PARITY_PG_BIN:-/usr/lib/postgresql/15/bin}"
sched_bin="$build/server/parity-scheduler"
load_bin="$build/bench/load/load_gen"
for bin in "$sched_bin" "$load_bin"; do
  [ -x "$bin" ] || { echo "run.sh: $bin is not built (cmake --build $build --target parity-scheduler load_gen)" >&2; exit 1; }
done
dir="$(mktemp -d /tmp/parity-load-XXXXXX)"
chmod 755 "$dir"
mkdir -p "$dir/pg/run" "$dir/logs"
pg_port=$((port_base + 1))
as_postgres() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }
[ "$(id -u)" = 0 ] && chown -R postgres "$dir/pg"
sched_pids=()
cleanup() {
  for pid in "${sched_pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${sched_pids[@]}"; do
    for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
  done
  as_postgres "$pg_bin/pg_ctl" -D "$dir/pg/data" -m immediate stop >/dev/null 2>&1 || true
  if [ "$keep" = 1 ]; then echo "run.sh: kept $dir"; else rm -rf "$dir"; fi
}
trap cleanup EXIT

echo "uptime before: $(uptime)"
# 1. PostgreSQL: trust on its unix socket only (no TCP), in the temporary directory.
as_postgres "$pg_bin/initdb" -D "$dir/pg/data" -A trust -U postgres -E UTF8 --no-sync \
  >"$dir/logs/initdb.log" 2>&1 || { cat "$dir/logs/initdb.log" >&2; exit 1; }
as_postgres "$pg_bin/pg_ctl" -D "$dir/pg/data" -l "$dir/pg/postgres.log" -w -t 60 start \
  -o "-c listen_addresses='' -k $dir/pg/run -p $pg_port -c max_connections=300 \
      -c shared_buffers=256MB -c fsync=$fsync -c synchronous_commit=$fsync" >/dev/null
"$pg_bin/createdb" -h "$dir/pg/run" -p "$pg_port" -U postgres parity
pg_pid="$(head -1 "$dir/pg/data/postmaster.pid")"
db_url="postgresql:///parity?host=$dir/pg/run&port=$pg_port&user=postgres"

# 2. The scheduler(s): limits lifted so one owner may queue a 10,000-run sweep (and more),
# and hold 200 watch streams; the web port takes 50 dashboards from one address.
addresses="" http_ports=""
for r in $(seq 1 "$replicas"); do
  grpc_port=$((port_base + 10 + r)) http_port=$((port_base + 20 + r))
  "$sched_bin" serve --database-url "$db_url" --listen "127.0.0.1:$grpc_port" \
    --http-listen "127.0.0.1:$http_port" --metrics-listen "" \
    --bootstrap-token-file "$dir/admin.token" --max-open-sweeps 10000 \
    --max-queued-runs 100000000 --max-watch-streams 10000 --db-pool-size "$pool_size" \
    --http-max-connections 2000 --http-max-connections-per-ip 1000 --log-level warn \
    >"$dir/logs/scheduler-$r.log" 2>&1 </dev/null &
  sched_pids+=("$!")
  ready=0
  for _ in $(seq 1 300); do
    if [ -s "$dir/admin.token" ] && curl -sf -o /dev/null -H "Authorization: Bearer $(head -1 "$dir/admin.token")" \
        "http://127.0.0.1:$http_port/api/v1/sweeps"; then ready=1; break; fi
    kill -0 "${sched_pids[-1]}" 2>/dev/null || break
    sleep 0.1
  done
  [ "$ready" = 1 ] || { echo "run.sh: scheduler $r not ready; its log:" >&2; tail -20 "$dir/logs/scheduler-$r.log" >&2; exit 1; }
  addresses="${addresses:+$addresses,}127.0.0.1:$grpc_port"
  http_ports="${http_ports:+$http_ports,}$http_port"
done
echo "schedulers: ${sched_pids[*]} on $addresses (pool $pool_size), postgres $pg_pid (fsync=$fsync)"

# 3. The load.
kill_flags=()
if [ -n "$kill_at" ] && [ "$replicas" -ge 2 ]; then kill_flags=(--kill-pid "${sched_pids[-1]}" --kill-at "$kill_at"); fi
pids_csv="$(IFS=,; echo "${sched_pids[*]}")"
rc=0
"$load_bin" --addresses "$addresses" --http-ports "$http_ports" --token-file "$dir/admin.token" \
  --scheduler-pids "$pids_csv" --postgres-pid "$pg_pid" "${kill_flags[@]}" "$@" \
  | tee "$dir/load.out" || rc=$?
if [ "$queries" = 1 ]; then
  sweep_id="$(sed -n 's/^submit .*sweep_id=\([0-9a-f-]*\).*/\1/p' "$dir/load.out")"
  bench/load/seed_copies.sh "$pg_bin/psql" "$dir/pg/run" "$pg_port" "$sweep_id" 9 || rc=1
  "$build/bench/load/load_queries" --address "${addresses%%,*}" --http-port "${http_ports%%,*}" \
    --token-file "$dir/admin.token" --sweep-id "$sweep_id" --budget 90 || rc=1
fi
echo "uptime after: $(uptime)"
grep -h "ERROR\|FATAL\|error" "$dir"/logs/scheduler-*.log | sort | uniq -c | sort -rn | head -10 || true
exit "$rc"
