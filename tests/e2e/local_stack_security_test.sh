#!/usr/bin/env bash
# The local stack keeps its secrets (issue #23) and its ports (issue #28), with deploy/local/up.sh
# itself on free ports in a scratch directory (no workers: only PostgreSQL and the scheduler matter here):
#   - PostgreSQL refuses a TCP connection without the password, another OS user (nobody) over TCP
#     and over the socket, and accepts the stack's URL (its passfile) — before the fix any local
#     user could connect as superuser, insert an admin token's hash or read the lease-secret key;
#   - a cluster made by an older up.sh (trust) gets a password when up.sh runs again;
#   - the admin and worker tokens and the password file are 0600, the stack's directories closed,
#     and no token appears in any log.
#   local_stack_security_test.sh BUILD_DIR        (ctest: local_stack_security)
set -euo pipefail
build="$1"
repo="$(cd "$(dirname "$0")/../.." && pwd)"
pg_bin="${PARITY_PG_BIN:-$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)}"
dir="$(mktemp -d /tmp/parity-stack-security.XXXXXX)"
failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }
cleanup() {
  rc=$?
  "$repo/deploy/local/down.sh" --dir "$dir" >/dev/null 2>&1 || true
  if [ "$rc" != 0 ] || [ "$failures" != 0 ]; then
    for log in "$dir"/up*.log "$dir"/logs/scheduler.log "$dir"/logs/postgres.log; do
      [ -f "$log" ] && { echo "--- last lines of $log"; tail -n 20 "$log"; }
    done
  fi
  rm -rf "$dir"
  exit "$rc"
}
trap cleanup EXIT

read -r port http_port pg_port metrics_port < <(python3 - <<'PY'
import socket
ports = []
held = []
for _ in range(4):
    s = socket.socket(); s.bind(("127.0.0.1", 0)); ports.append(s.getsockname()[1]); held.append(s)
for s in held: s.close()
print(*ports)
PY
)
up() {
  "$repo/deploy/local/up.sh" --dir "$dir" --build-dir "$build" --workers 0 --threads 1 \
    --port "$port" --http-port "$http_port" --pg-port "$pg_port" --metrics-port "$metrics_port" \
    >"$dir/$1" 2>&1 || { cat "$dir/$1"; exit 1; }
}
psql_as() {  # psql_as USER ARGS... : exit status of a SELECT 1 (no password prompt, 5 s at most)
  local user="$1"; shift
  local run=()
  [ "$user" != "$(id -un)" ] && run=(runuser -u "$user" --)
  PGCONNECT_TIMEOUT=5 "${run[@]}" env -u PGPASSFILE -u PGPASSWORD "$pg_bin/psql" -w -X -tA \
    -c 'SELECT 1' "$@" </dev/null
}
mode() { stat -c %a "$1"; }

# --- An older stack: a cluster that trusts every local connection (what up.sh used to make).
mkdir -p "$dir/pg/data" "$dir/logs"
if [ "$(id -u)" = 0 ]; then chown postgres "$dir/pg" "$dir/pg/data"; chmod 711 "$dir"; fi
as_postgres() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }
as_postgres "$pg_bin/initdb" -D "$dir/pg/data" -A trust -U postgres --no-sync >/dev/null 2>&1
up up-1.log
grep -q "trusted every local connection; setting a password" "$dir/up-1.log" ||
  fail "up.sh did not put a password on the trust cluster it found"

url="$(. "$dir/stack.env"; echo "$db_url")"
case "$url" in *"passfile=$dir/pgpass"*) ;; *) fail "the database URL does not name the passfile: $url" ;; esac
psql_as "$(id -un)" "$url" >/dev/null || fail "the stack's own URL (with its passfile) is refused"
if out="$(psql_as "$(id -un)" -h 127.0.0.1 -p "$pg_port" -U postgres parity 2>&1)"; then
  fail "TCP without the password is accepted: $out"
else
  case "$out" in *password*) ;; *) fail "TCP without the password fails for another reason: $out" ;; esac
fi
if [ "$(id -u)" = 0 ]; then
  out="$(psql_as nobody -h 127.0.0.1 -p "$pg_port" -U postgres parity 2>&1)" &&
    fail "another OS user (nobody) connects over TCP: $out"
  out="$(psql_as nobody -h "$dir/pg/run" -p "$pg_port" -U postgres parity 2>&1)" &&
    fail "another OS user (nobody) connects over the socket: $out"
  out="$(runuser -u nobody -- cat "$dir/pgpass" 2>&1)" && fail "nobody reads the password file"
  out="$(runuser -u nobody -- cat "$dir/admin.token" 2>&1)" && fail "nobody reads the admin token"
  out="$(runuser -u nobody -- ls "$dir/logs" 2>&1)" && fail "nobody lists the logs"
else
  echo "note: not root, so the other-OS-user checks (runuser -u nobody) are not run"
fi
"$pg_bin/psql" "$url" -X -tAc "SELECT 1" >/dev/null 2>&1 ||
  fail "psql \"\$db_url\" (the README's command) does not connect"

for f in admin.token pgpass; do
  [ "$(mode "$dir/$f")" = 600 ] || fail "$f has mode $(mode "$dir/$f"), expected 600"
done
for d in pids checkpoints work pg pg/run; do
  [ "$(mode "$dir/$d")" = 700 ] || fail "$d/ has mode $(mode "$dir/$d"), expected 700"
done

# --- A new stack: initdb with a password from the start; the workers' token made with --out.
"$repo/deploy/local/down.sh" --dir "$dir" >/dev/null
rm -rf "$dir/pg" "$dir/pgpass" "$dir/up-1.log"
up up-2.log
grep -q "password authentication" "$dir/up-2.log" || fail "a new cluster was not made with a password"
psql_as "$(id -un)" "$(. "$dir/stack.env"; echo "$db_url")" >/dev/null ||
  fail "the new cluster refuses the stack's URL"
out="$(psql_as "$(id -un)" -h 127.0.0.1 -p "$pg_port" -U postgres parity 2>&1)" &&
  fail "the new cluster accepts TCP without the password: $out"
[ "$(mode "$dir/worker.token")" = 600 ] || fail "worker.token has mode $(mode "$dir/worker.token")"
for token in "$(cat "$dir/admin.token")" "$(cat "$dir/worker.token")"; do
  [ -n "$token" ] || fail "a token file is empty"
  if grep -rqF -- "$token" "$dir/logs" "$dir"/up-*.log; then fail "a token appears in a log"; fi
done

# --- up.sh run again with no port flags keeps the ports it was started with (issue #28).
"$repo/deploy/local/up.sh" --dir "$dir" --build-dir "$build" --workers 0 >"$dir/up-3.log" 2>&1 ||
  { cat "$dir/up-3.log"; fail "a second up.sh without port flags failed"; }
grep -q "scheduler already running" "$dir/up-3.log" ||
  fail "a second up.sh without port flags did not find the running scheduler: $(cat "$dir/up-3.log")"
grep -q "127.0.0.1:$port" "$dir/up-3.log" ||
  fail "a second up.sh without port flags reported another port than $port: $(cat "$dir/up-3.log")"
[ "$(. "$dir/stack.env"; echo "$port:$pg_port:$http_port")" = "$port:$pg_port:$http_port" ] ||
  fail "stack.env lost the ports after a second up.sh: $(cat "$dir/stack.env")"

[ "$failures" = 0 ] || exit 1
echo "local stack security: all checks passed"
