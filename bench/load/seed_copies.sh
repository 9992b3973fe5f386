#!/usr/bin/env bash
# Grows a loaded sweep to a lab's size for the query timings (load_queries): COPIES more copies
# of its runs (new run ids, ordinals after the originals, seeds shifted so that each copy's MoE
# runs find their own copy's dense baseline) and of their metric points, in SQL, in one
# transaction. The API cannot make such a sweep quickly: SubmitSweep plans at most 10,000 runs
# (SchedulerOptions::max_runs_per_sweep, no flag), and completing 100,000 runs through
# CompleteRun at this machine's ~20/s would take more than an hour. Copies of runs that had not
# ended are PENDING (no lease). A bench tool over the schema of server/sql/schema.snapshot.sql:
# it names only runs' and metrics' key columns and copies the others whole.
#
#   bench/load/seed_copies.sh PSQL SOCKET_DIR PORT SWEEP_ID COPIES
set -euo pipefail
psql_bin="$1" socket="$2" port="$3" sweep="$4" copies="$5"
start=$(date +%s.%N)
"$psql_bin" -h "$socket" -p "$port" -U postgres -v ON_ERROR_STOP=1 -q parity <<SQL
BEGIN;
CREATE TEMP TABLE originals AS SELECT * FROM runs WHERE sweep_id = '$sweep';
-- Each original once per copy, with its new id and copy number in two extra columns (dropped
-- before the insert, so that * matches runs' columns again).
CREATE TEMP TABLE new_runs AS
  SELECT o.*, gen_random_uuid() AS new_id, c AS copy_no, o.run_id AS old_id
  FROM originals o CROSS JOIN generate_series(1, $copies) AS c;
UPDATE new_runs SET run_id = new_id,
    ordinal = ordinal + copy_no * (SELECT max(ordinal) + 1 FROM originals),
    seed = seed + copy_no * 1000000,
    name = name || '-copy' || copy_no;
UPDATE new_runs SET state = 'PENDING', lease_owner = NULL, lease_epoch = 0,
    lease_expires_at = NULL, device_indices = '{}'
  WHERE state NOT IN ('SUCCEEDED', 'FAILED', 'CANCELLED');
CREATE TEMP TABLE run_ids AS SELECT old_id, new_id FROM new_runs;
ALTER TABLE new_runs DROP COLUMN new_id, DROP COLUMN copy_no, DROP COLUMN old_id;
INSERT INTO runs SELECT * FROM new_runs;
CREATE TEMP TABLE new_metrics AS
  SELECT m.*, i.new_id FROM metrics m JOIN run_ids i ON m.run_id = i.old_id;
UPDATE new_metrics SET run_id = new_id;
ALTER TABLE new_metrics DROP COLUMN new_id;
INSERT INTO metrics SELECT * FROM new_metrics;
COMMIT;
ANALYZE runs;
ANALYZE metrics;
SQL
runs=$("$psql_bin" -h "$socket" -p "$port" -U postgres -tAc \
  "SELECT count(*), count(*) FILTER (WHERE state = 'SUCCEEDED') FROM runs WHERE sweep_id = '$sweep'" parity)
points=$("$psql_bin" -h "$socket" -p "$port" -U postgres -tAc \
  "SELECT count(*) FROM metrics m JOIN runs r USING (run_id) WHERE r.sweep_id = '$sweep'" parity)
echo "seeded sweep=$sweep runs|succeeded=$runs metric_points=$points seconds=$(echo "$(date +%s.%N) - $start" | bc)"
