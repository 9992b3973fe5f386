#!/usr/bin/env bash
# The Python client against a real stack: deploy/local/up.sh brings up a throwaway PostgreSQL
# cluster, parity-scheduler and two CPU parity-workers (one engine thread each) in a scratch
# directory on free ports; test_client.py then exercises every client call; the stack is torn
# down and the directory removed whatever happens (its logs are printed on failure).
#   run_e2e.sh PYTHON PYTHONPATH BUILD_DIR      (ctest: python_client_e2e, labels clients;e2e)
set -euo pipefail
python="$1"; pypath="$2"; build="$3"
repo="$(cd "$(dirname "$0")/../../.." && pwd)"
"$python" -c "import grpc, google.protobuf, yaml" 2>/dev/null || {
  echo "run_e2e.sh: $python lacks grpc/protobuf/yaml (apt-get install python3-grpcio python3-protobuf python3-yaml)" >&2
  exit 1; }
[ -f "$repo/data/kjv.txt" ] || { echo "run_e2e.sh: the test sweep trains on data/kjv.txt, which is missing" >&2; exit 1; }

dir="$(mktemp -d /tmp/parity-pyclient.XXXXXX)"
stack=(--dir "$dir" --build-dir "$build")
cleanup() {
  rc=$?
  "$repo/deploy/local/down.sh" --dir "$dir" >/dev/null 2>&1 || true
  if [ "$rc" != 0 ]; then
    for log in "$dir"/logs/scheduler.log "$dir"/logs/worker-*.log; do
      [ -f "$log" ] && { echo "--- last lines of $log"; tail -n 30 "$log"; }
    done
  fi
  rm -rf "$dir"
  exit "$rc"
}
trap cleanup EXIT

# Free ports: the scheduler's gRPC, HTTP and PostgreSQL, and a metrics base with the two ports
# above it free for the workers (up.sh gives worker-N base + N).
read -r port http_port pg_port metrics_port < <("$python" - <<'PY'
import socket
def free(n=1):
    while True:
        s = socket.socket(); s.bind(("127.0.0.1", 0)); base = s.getsockname()[1]; s.close()
        if base + n > 65535: continue
        try:
            held = []
            for p in range(base, base + n):
                t = socket.socket(); t.bind(("127.0.0.1", p)); held.append(t)
            for t in held: t.close()
            return base
        except OSError:
            for t in held: t.close()
print(free(), free(), free(), free(3))
PY
)
"$repo/deploy/local/up.sh" "${stack[@]}" --workers 2 --threads 1 --port "$port" \
  --http-port "$http_port" --pg-port "$pg_port" --metrics-port "$metrics_port" \
  --lease-ttl 5s --heartbeat-interval 500ms >"$dir/up.log" 2>&1 || { cat "$dir/up.log"; exit 1; }

export PARITY_SCHEDULER="127.0.0.1:$port" PYTHONPATH="$pypath" MPLBACKEND=Agg
export PARITY_CLIENT_TEST_DIR="$dir" PARITY_CLI="$build/cli/parity"
# The admin token the local stack's scheduler made at its start (deploy/local/up.sh).
export PARITY_TOKEN_FILE="$dir/admin.token"
cd "$repo"
"$python" -m unittest -v clients/python/tests/test_client.py
