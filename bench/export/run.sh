#!/usr/bin/env bash
# `parity results --format csv|json|parquet` on a sweep of 100,000 runs: a private stack
# (deploy/local/up.sh, no workers) in a temporary directory, one sweep submitted through the
# scheduler (examples/micro.yaml with enough seeds for ~10,000 runs, the scheduler's default cap
# per sweep), its runs copied in PostgreSQL until the sweep holds RUNS runs, every run marked
# SUCCEEDED with a final BPC per evaluation set, then each format timed (wall time and peak RSS
# of the CLI) and the stack taken down.
#
#   bench/export/run.sh [BUILD_DIR]        RUNS=100000 PORT_BASE=50190 PROBE=1 INDEX=0
set -euo pipefail
cd "$(dirname "$0")/../.."
build="${1:-build}"
runs="${RUNS:-100000}"
base="${PORT_BASE:-50190}"
dir="$(mktemp -d /tmp/parity-export-bench-XXXXXX)"
chmod 755 "$dir"  # the postgres user runs the cluster inside it
trap 'deploy/local/down.sh --dir "$dir" >/dev/null 2>&1 || true; rm -rf "$dir"' EXIT
deploy/local/up.sh --dir "$dir" --build-dir "$build" --workers 0 --threads 1 --port "$base" \
  --pg-port "$((base + 1))" --http-port "$((base + 2))" --metrics-port "$((base + 3))" \
  >"$dir/up.log" || { cat "$dir/up.log" >&2; exit 1; }
# shellcheck disable=SC1091
. "$dir/stack.env"
export PARITY_SCHEDULER="127.0.0.1:$port" PARITY_TOKEN_FILE="$dir/admin.token"
cli="$build/cli/parity"

# 12 runs per seed (4 MoE points × 2 data variants + their dense baselines): 833 seeds ≈ 10,000.
sed -e 's/^name: micro$/name: export-bench/' -e "s/^  seeds: \[0, 1\]$/  seeds: [$(seq -s, 0 832)]/" \
  examples/micro.yaml >"$dir/spec.yaml"
"$cli" submit "$dir/spec.yaml" >"$dir/submit.log"
sweep="$(awk '/^sweep /{print $2; exit}' "$dir/submit.log")"
psql_() { psql "$db_url" -qtAX -v ON_ERROR_STOP=1 "$@"; }
planned="$(psql_ -c "SELECT count(*) FROM runs WHERE sweep_id = '$sweep'")"
# Copies of the planned runs (new ids, names and ordinals, the same specs) up to $runs, then every
# run finished: final BPC on the primary set and on "code", measured M, wall time, digest.
psql_ <<SQL
INSERT INTO runs (run_id, sweep_id, ordinal, name, spec_json, spec_bytes, role, layout, params,
                  active_params, activation_rate, flops_per_token, compute_flops, tokens,
                  unique_tokens, epochs, d_model, num_layers, num_experts, top_k, expert_hidden,
                  compute_budget, compute_multiple, data_variant, seed,
                  predicted_efficiency_leverage)
SELECT gen_random_uuid(), sweep_id, ordinal + $planned * k, name || '-copy' || k, spec_json,
       spec_bytes, role, layout, params, active_params, activation_rate, flops_per_token,
       compute_flops, tokens, unique_tokens, epochs, d_model, num_layers, num_experts, top_k,
       expert_hidden, compute_budget, compute_multiple, data_variant, seed + 1000 * k,
       predicted_efficiency_leverage
FROM runs, generate_series(1, ($runs - 1) / $planned) AS k
WHERE sweep_id = '$sweep' AND ordinal + $planned * k < $runs;
UPDATE runs SET state = 'SUCCEEDED', final_train_bpc = 1.8 + random() / 10,
       final_val_bpc = 1.9 + random() / 10, measured_flops_per_token = flops_per_token,
       wall_seconds = 30 + random() * 60, summary_tokens = tokens, summary_steps = 200,
       final_eval_bpc = jsonb_build_object('validation', 1.9 + random() / 10,
                                           'code', 2.4 + random() / 10),
       dataset_digest = repeat('ab', 32), ended_at = now()
WHERE sweep_id = '$sweep';
UPDATE sweeps SET state = 'SUCCEEDED', ended_at = now() WHERE sweep_id = '$sweep';
SQL
psql_ -c "ANALYZE runs"
total="$(psql_ -c "SELECT count(*) FROM runs WHERE sweep_id = '$sweep'")"
echo "sweep $sweep: $total runs ($planned planned by the scheduler, the rest copied in SQL)"
echo "machine: $(nproc) cores, $(awk '/MemTotal/{printf "%.0f GiB", $2/1048576}' /proc/meminfo); $(date -u +%F)"

# The results view finds each run's 1C baseline with a LATERAL subquery ordered by ordinal: with
# only the (sweep_id, ordinal) index it walks the sweep per row. Timed here on 1,000 rows as the
# schema stands (PROBE=0 skips it: minutes), then with an index that lets it jump to the run's
# seed when INDEX=1 (not in migrations/; `parity results` reads ListRuns and needs neither).
probe() {
  psql_ -c "SET statement_timeout = '600s'" -c "\\timing on" \
    -c "SELECT count(*) FROM (SELECT * FROM results WHERE sweep_id = '$sweep' ORDER BY ordinal LIMIT 1000) x" |
    awk '/^Time:/{print $2 / 1000 " s"}' | tail -1
}
if [ "${PROBE:-1}" = 1 ]; then
  echo "results view, first 1,000 rows, schema as migrated: $(probe)"
fi
if [ "${INDEX:-0}" = 1 ]; then
  psql_ -c "CREATE INDEX runs_by_sweep_seed_ordinal ON runs (sweep_id, seed, ordinal) WHERE state = 'SUCCEEDED'"
  echo "results view, first 1,000 rows, with runs (sweep_id, seed, ordinal) WHERE SUCCEEDED: $(probe)"
fi
printf '%-8s %10s %12s %12s %14s %10s\n' format seconds "CLI CPU s" bytes "peak RSS MiB" rows
for format in csv json parquet table; do
  out="$dir/results.$format"
  /usr/bin/time -f '%e %U %S %M' -o "$dir/time.$format" "$cli" results "$sweep" --format "$format" \
    --out "$out" --timeout 600
  read -r seconds user sys rss <"$dir/time.$format"
  rows="-"
  [ "$format" = csv ] && rows="$(($(wc -l <"$out") - 1))"
  printf '%-8s %10s %12s %12s %14s %10s\n' "$format" "$seconds" \
    "$(echo "$user + $sys" | bc)" "$(stat -c %s "$out")" "$((rss / 1024))" "$rows"
done
