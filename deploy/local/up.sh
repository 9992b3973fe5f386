#!/usr/bin/env bash
# Brings up the embedded local stack, idempotently: a private PostgreSQL cluster, the database,
# `parity-scheduler migrate`, `parity-scheduler serve`, and N `parity-worker`s, all in the
# background with logs and pid files under DIR. Waits until the scheduler is healthy.
#
#   deploy/local/up.sh [--dir DIR] [--workers N] [--port P] [--http-port P] [--metrics-port P]
#                      [--pg-port P] [--build-dir B] [--threads T] [--lease-ttl 60s]
#                      [--heartbeat-interval 15s]
# Defaults: DIR=<repo>/.parity, 2 workers, scheduler on 127.0.0.1:50051 with its web dashboard on
# http://127.0.0.1:8080/ and Prometheus metrics on 127.0.0.1:9464 (worker-N on 9464+N),
# PostgreSQL on 54329, binaries from <repo>/build (PARITY_BUILD_DIR).
# Access (everything on loopback, plaintext): the scheduler creates the admin token in
# DIR/admin.token at its first start; the workers use a worker token made with it
# (DIR/worker.token); both files are 0600. `export PARITY_TOKEN_FILE=DIR/admin.token` for the CLI.
# PostgreSQL takes only its owner: a password (scram-sha-256) made at initdb, kept in DIR/pgpass
# (0600), which the database URL names (`psql "$db_url"`); TCP on 127.0.0.1 only, the socket in
# DIR/pg/run (0700). DIR and everything in it are private to the user running up.sh.
# Running it again starts only what is not running, with the ports and settings DIR/stack.env kept
# from the first start unless flags name others (and puts a password on an older cluster that
# still trusted every local connection).
set -euo pipefail
usage() { sed -n '2,20p' "$0"; }
# Every file and directory made from here on is the user's alone: tokens, the database password,
# logs, checkpoints.
umask 077
. "$(dirname "$0")/lib.sh"
parse_args "$@"
# The ports and settings of an earlier up.sh on DIR, unless named again on this command line.
load_stack_env

sched_bin="$build/server/parity-scheduler"
worker_bin="$build/worker/parity-worker"
for b in "$sched_bin" "$worker_bin"; do
  [ -x "$b" ] || { echo "up.sh: $b is missing: build first (deploy/setup.sh)" >&2; exit 1; }
done
[ -x "$pg_bin/initdb" ] || { echo "up.sh: PostgreSQL binaries not found (apt-get install postgresql)" >&2; exit 1; }

mkdir -p "$dir"/{pg/data,pg/run,logs,pids,checkpoints,work}
# A directory made before umask 077 (or by an older up.sh) is closed too. As root, PostgreSQL runs
# as the postgres user, which must pass through DIR and DIR/logs (to its own pg/ and postgres.log)
# without reading them: 0711.
chmod 700 "$dir"/{pids,checkpoints,work}
if [ "$(id -u)" = 0 ]; then chmod 711 "$dir" "$dir/logs"; else chmod 700 "$dir" "$dir/logs"; fi
pgpass="$dir/pgpass"
export PGPASSFILE="$pgpass"  # for psql and createdb below
db_url="postgresql://postgres@127.0.0.1:$pg_port/parity?passfile=$pgpass"

# 1. PostgreSQL: a throwaway-style cluster owned by the postgres user when we are root, which
# accepts only the password in DIR/pgpass (scram-sha-256), on its private socket and 127.0.0.1.
if [ "$(id -u)" = 0 ]; then
  chown postgres "$dir/pg" "$dir/pg/data" "$dir/pg/run"
  touch "$dir/logs/postgres.log"
  chown postgres "$dir/logs/postgres.log"
fi
chmod 700 "$dir/pg" "$dir/pg/data" "$dir/pg/run"
new_password() { head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n'; }
write_pgpass() {  # write_pgpass PASSWORD: libpq's password file, read through the URL's passfile=
  printf '*:*:*:postgres:%s\n' "$1" >"$pgpass.new"
  mv "$pgpass.new" "$pgpass"
}
if [ ! -f "$dir/pg/data/PG_VERSION" ]; then
  echo "up: initdb $dir/pg/data (password authentication; the password is in $pgpass)"
  password="$(new_password)"
  printf '%s\n' "$password" >"$dir/pg/initdb.pw"
  [ "$(id -u)" = 0 ] && chown postgres "$dir/pg/initdb.pw"
  as_postgres "$pg_bin/initdb" -D "$dir/pg/data" -A scram-sha-256 --pwfile="$dir/pg/initdb.pw" \
    -U postgres -E UTF8 --no-sync >"$dir/logs/initdb.log" 2>&1 || {
    rm -f "$dir/pg/initdb.pw"; echo "up.sh: initdb failed; see $dir/logs/initdb.log" >&2; exit 1; }
  rm -f "$dir/pg/initdb.pw"
  write_pgpass "$password"
fi
if pg_running; then
  echo "up: postgres already running"
else
  echo "up: starting postgres on 127.0.0.1:$pg_port"
  as_postgres "$pg_bin/pg_ctl" -D "$dir/pg/data" -l "$dir/logs/postgres.log" -w -t 30 \
    -o "-k $dir/pg/run -p $pg_port -c listen_addresses=127.0.0.1 -c unix_socket_permissions=0700 -c fsync=off" \
    start >/dev/null
fi
# A cluster made by an older up.sh trusted every local connection: any local user could connect
# as the superuser. Give it a password and make it ask for one.
if as_postgres grep -Eq '^[[:space:]]*(local|host)[[:space:]].*[[:space:]]trust([[:space:]]|$)' \
     "$dir/pg/data/pg_hba.conf"; then
  echo "up: the cluster trusted every local connection; setting a password (in $pgpass)"
  password="$(new_password)"
  # On stdin, not on a command line that `ps` shows.
  "$pg_bin/psql" -h "$dir/pg/run" -p "$pg_port" -U postgres -qX -v ON_ERROR_STOP=1 postgres \
    <<<"SET password_encryption = 'scram-sha-256'; ALTER ROLE postgres PASSWORD '$password';"
  write_pgpass "$password"
  as_postgres tee "$dir/pg/data/pg_hba.conf" >/dev/null <<'HBA'
# Written by deploy/local/up.sh: only the postgres role, only with its password.
local   all   postgres                 scram-sha-256
host    all   postgres   127.0.0.1/32  scram-sha-256
HBA
  as_postgres "$pg_bin/pg_ctl" -D "$dir/pg/data" reload >/dev/null
fi
[ -s "$pgpass" ] || { echo "up.sh: $pgpass is missing, so nothing can sign in to the cluster in $dir/pg; delete $dir/pg to start a new one" >&2; exit 1; }
if ! "$pg_bin/psql" -h "$dir/pg/run" -p "$pg_port" -U postgres -tAc \
    "SELECT 1 FROM pg_database WHERE datname = 'parity'" postgres | grep -q 1; then
  echo "up: creating database parity"
  "$pg_bin/createdb" -h "$dir/pg/run" -p "$pg_port" -U postgres parity
fi

cat >"$dir/stack.env" <<ENV
port=$port
http_port=$http_port
metrics_port=$metrics_port
pg_port=$pg_port
build=$build
workers=$workers
threads=$threads
lease_ttl=$lease_ttl
heartbeat=$heartbeat
db_url=$db_url
ENV

# 2. The scheduler: migrate, then serve.
export PARITY_DATABASE_URL="$db_url" PARITY_LISTEN="127.0.0.1:$port"
export PARITY_HTTP_LISTEN="127.0.0.1:$http_port" PARITY_METRICS_LISTEN="127.0.0.1:$metrics_port"
[ -n "$lease_ttl" ] && export PARITY_LEASE_TTL="$lease_ttl"
[ -n "$heartbeat" ] && export PARITY_HEARTBEAT_INTERVAL="$heartbeat"
if pid_alive "$dir/pids/scheduler.pid"; then
  echo "up: scheduler already running (pid $(cat "$dir/pids/scheduler.pid"))"
else
  "$sched_bin" migrate >>"$dir/logs/scheduler.log" 2>&1 || {
    echo "up.sh: migration failed; see $dir/logs/scheduler.log" >&2; exit 1; }
  echo "up: starting scheduler on 127.0.0.1:$port (dashboard http://127.0.0.1:$http_port/)"
  setsid "$sched_bin" serve --bootstrap-token-file "$dir/admin.token" \
    >>"$dir/logs/scheduler.log" 2>&1 </dev/null &
  echo $! >"$dir/pids/scheduler.pid"
fi
for _ in $(seq 1 300); do
  scheduler_healthy && break
  pid_alive "$dir/pids/scheduler.pid" || { echo "up.sh: scheduler exited; see $dir/logs/scheduler.log" >&2; exit 1; }
  sleep 0.1
done
scheduler_healthy || { echo "up.sh: scheduler not healthy after 30 s; see $dir/logs/scheduler.log" >&2; exit 1; }

# 3. The workers' token (role worker), made once with the admin token the scheduler created.
cli_bin="$build/cli/parity"
if [ ! -s "$dir/worker.token" ]; then
  for _ in $(seq 1 50); do [ -s "$dir/admin.token" ] && break; sleep 0.1; done
  "$cli_bin" token create --name local-workers --role worker --scheduler "127.0.0.1:$port" \
    --token-file "$dir/admin.token" --out "$dir/worker.token" --force \
    2>>"$dir/logs/scheduler.log" || {
    echo "up.sh: cannot create the workers' token; see $dir/logs/scheduler.log" >&2; exit 1; }
fi

# The secret Prometheus sends (basic-auth password) to the workers' metrics ports, made once.
if [ ! -s "$dir/metrics.token" ]; then
  (umask 077 && head -c 32 /dev/urandom | base64 | tr -d '/+=\n' >"$dir/metrics.token")
fi

# 4. Workers, sharing one checkpoint store; the host's threads split between them by default.
[ -n "$threads" ] || threads=$(( $(nproc) / workers > 0 ? $(nproc) / workers : 1 ))
started_workers=()
for i in $(seq 1 "$workers"); do
  pidf="$dir/pids/worker-$i.pid"
  if pid_alive "$pidf"; then
    echo "up: worker-$i already running (pid $(cat "$pidf"))"
    continue
  fi
  args=(--scheduler "127.0.0.1:$port" --checkpoint-dir "$dir/checkpoints" --work-dir "$dir/work/worker-$i"
        --corpus-dir "$repo/data" --label "local=worker-$i" --token-file "$dir/worker.token")
  args+=(--threads "$threads" --metrics-listen "127.0.0.1:$((metrics_port + i))"
         --metrics-token-file "$dir/metrics.token")
  log_offset=$(stat -c %s "$dir/logs/worker-$i.log" 2>/dev/null || echo 0)
  setsid "$worker_bin" "${args[@]}" >>"$dir/logs/worker-$i.log" 2>&1 </dev/null &
  echo $! >"$pidf"
  echo "up: started worker-$i (pid $!)"
  started_workers+=("$i:$log_offset")
done
# Wait (30 s at most) until the workers just started have registered with the datasets they
# verified: a sweep submitted right after is then pinned to those datasets' digests
# (SubmitSweep pins data.dataset_digest from the live workers' holdings).
for entry in "${started_workers[@]}"; do
  i="${entry%%:*}" offset="${entry#*:}"
  for _ in $(seq 1 300); do
    tail -c +"$((offset + 1))" "$dir/logs/worker-$i.log" | grep -q "registered as" && break
    pid_alive "$dir/pids/worker-$i.pid" || { echo "up.sh: worker-$i exited; see $dir/logs/worker-$i.log" >&2; break; }
    sleep 0.1
  done
done

cat <<INFO

Parity local stack is up.
  scheduler   127.0.0.1:$port  (export PARITY_SCHEDULER=127.0.0.1:$port)
  dashboard   http://127.0.0.1:$http_port/   (sign in: xdg-open "http://127.0.0.1:$http_port/login?token=\$(cat $dir/admin.token)")
  token       export PARITY_TOKEN_FILE=$dir/admin.token   (admin; \`parity token create\` makes others)
  metrics     http://127.0.0.1:$metrics_port/metrics (scheduler; basic auth, the token as password), ports $((metrics_port + 1))-$((metrics_port + workers)) (workers; basic auth, $dir/metrics.token as password)
  database    psql "$db_url"
  logs        $dir/logs/
  checkpoints $dir/checkpoints/
  status      deploy/local/status.sh --dir $dir
  stop        deploy/local/down.sh --dir $dir
INFO
