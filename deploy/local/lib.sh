# shellcheck shell=bash disable=SC2034
# Shared by up.sh, down.sh and status.sh: option parsing, paths, process helpers.
# Layout of the stack directory DIR (default <repo>/.parity):
#   DIR/pg/data          PostgreSQL cluster          DIR/pg/run   its socket
#   DIR/logs/*.log       postgres, scheduler, worker-N
#   DIR/pids/*.pid       scheduler, worker-N
#   DIR/checkpoints      the checkpoint store shared by the local workers
#   DIR/work/worker-N    each worker's scratch (specs, engine logs, its saved worker id)
#   DIR/stack.env        what up.sh started with (ports, URLs), sourced by down/status
#   DIR/admin.token, DIR/worker.token, DIR/pgpass   the secrets (0600)

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
dir="${PARITY_STACK_DIR:-$repo/.parity}"
workers=2
port="${PARITY_PORT:-50051}"
http_port="${PARITY_HTTP_PORT:-8080}"
# Prometheus /metrics: the scheduler on this port, worker-N on this port + N.
metrics_port="${PARITY_METRICS_PORT:-9464}"
pg_port="${PARITY_PG_PORT:-54329}"
build="${PARITY_BUILD_DIR:-$repo/build}"
threads=""
lease_ttl="${PARITY_LEASE_TTL:-}"
heartbeat="${PARITY_HEARTBEAT_INTERVAL:-}"
pg_bin="${PARITY_PG_BIN:-$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)}"

given=" "  # the options named on this command line, which win over DIR/stack.env
parse_args() {
  while [ $# -gt 0 ]; do
    case "$1" in
      --dir) dir="$2"; shift 2 ;;
      --workers) workers="$2"; given+="workers "; shift 2 ;;
      --port) port="$2"; given+="port "; shift 2 ;;
      --http-port) http_port="$2"; given+="http_port "; shift 2 ;;
      --metrics-port) metrics_port="$2"; given+="metrics_port "; shift 2 ;;
      --pg-port) pg_port="$2"; given+="pg_port "; shift 2 ;;
      --build-dir) build="$2"; given+="build "; shift 2 ;;
      --threads) threads="$2"; given+="threads "; shift 2 ;;
      --lease-ttl) lease_ttl="$2"; given+="lease_ttl "; shift 2 ;;
      --heartbeat-interval) heartbeat="$2"; given+="heartbeat "; shift 2 ;;
      -h|--help) usage; exit 0 ;;
      *) echo "$(basename "$0"): unknown option '$1' (see --help)" >&2; exit 2 ;;
    esac
  done
  mkdir -p "$dir"
  dir="$(cd "$dir" && pwd)"
  case "$build" in /*) ;; *) build="$repo/$build" ;; esac
}

# After up.sh ran, its choices win over the defaults, so a second up.sh, down.sh and status.sh
# need no flags; an option named on the command line wins over both.
load_stack_env() {
  [ -f "$dir/stack.env" ] || return 0
  local key value
  while IFS='=' read -r key value; do
    case "$key" in
      port|http_port|metrics_port|pg_port|build|workers|threads|lease_ttl|heartbeat|db_url) ;;
      *) continue ;;  # not ours: never evaluated
    esac
    case "$given" in *" $key "*) continue ;; esac
    printf -v "$key" '%s' "$value"
  done <"$dir/stack.env"
}

as_postgres() {
  if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

pid_alive() {  # pid_alive FILE → 0 when the pid in FILE runs
  [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null
}

# Sends SIGTERM, waits up to $2 seconds, then SIGKILL. $1 = pid file.
stop_pid() {
  local file="$1" wait_s="${2:-30}" pid
  pid_alive "$file" || { rm -f "$file"; return 0; }
  pid="$(cat "$file")"
  kill -TERM "$pid" 2>/dev/null || true
  for _ in $(seq 1 $((wait_s * 10))); do
    kill -0 "$pid" 2>/dev/null || { rm -f "$file"; return 0; }
    sleep 0.1
  done
  echo "  $(basename "$file" .pid) did not stop in ${wait_s}s: SIGKILL" >&2
  kill -KILL "$pid" 2>/dev/null || true
  rm -f "$file"
}

pg_running() {
  [ -f "$dir/pg/data/PG_VERSION" ] && as_postgres "$pg_bin/pg_ctl" -D "$dir/pg/data" status >/dev/null 2>&1
}

scheduler_healthy() {
  [ -x "$build/worker/parity-worker" ] && "$build/worker/parity-worker" --probe --scheduler "127.0.0.1:$port" >/dev/null 2>&1
}
