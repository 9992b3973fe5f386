-- SweepCatalog's statements: sweeps and their runs (postgres_run_store.cc).

-- name: sweep_by_key
-- $1 key, $2 owner: keys are each owner's (migration 0013).
SELECT sweep_id::text, spec_bytes FROM sweeps WHERE owner = $2 AND idempotency_key = $1

-- name: insert_sweep
-- $1 name, $2 spec json, $3 spec bytes, $4 key (NULL = none), $5 owner, $6 priority.
INSERT INTO sweeps (sweep_id, name, spec_json, spec_bytes, idempotency_key, owner, priority)
VALUES (gen_random_uuid(), $1, $2::jsonb, $3, $4, $5, $6)
ON CONFLICT (owner, idempotency_key) DO NOTHING RETURNING sweep_id::text

-- name: insert_run
-- $1 sweep, $2 ordinal, then the columns in the order listed; ranks (a gang's world size) is
-- read from the spec ($4), 1 when unset, and so is the dataset pin (migration 0024; NULL = none).
INSERT INTO runs (run_id, sweep_id, ordinal, name, spec_json, spec_bytes, role, layout, params,
                  active_params, activation_rate, flops_per_token, compute_flops, tokens,
                  unique_tokens, epochs, d_model, num_layers, num_experts, top_k, expert_hidden,
                  compute_budget, compute_multiple, data_variant, seed,
                  predicted_efficiency_leverage, cpu_threads, gpus, memory_bytes,
                  gpu_memory_bytes, priority, max_attempts, ranks, dataset_pin)
VALUES (gen_random_uuid(), $1, $2, $3, $4::jsonb, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14,
        $15, $16, $17, $18, $19, $20, $21, $22, $23, $24, $25, $26, $27, $28, $29, $30, $31,
        greatest(coalesce(($4::jsonb #>> '{resources,ranks}')::integer, 1), 1),
        nullif($4::jsonb #>> '{data,dataset_digest}', ''))
RETURNING run_id::text

-- name: insert_creation_events
-- $1 sweep: one 'submitted' event per run.
INSERT INTO events (run_id, sweep_id, from_state, to_state, attempt, reason)
SELECT run_id, sweep_id, NULL, 'PENDING', attempt, 'submitted' FROM runs WHERE sweep_id = $1

-- name: run_ids_of_sweep
SELECT run_id::text FROM runs WHERE sweep_id = $1 ORDER BY ordinal

-- name: get_sweep
{{sweep_select}} WHERE s.sweep_id = $1

-- name: lock_sweep
SELECT state FROM sweeps WHERE sweep_id = $1 FOR UPDATE

-- name: delete_ended_sweep
-- $1 sweep. Its runs go with it (ON DELETE CASCADE), their events and metrics with them
-- (runs_deleted_with_records); only once it has ended: a live run's worker still writes. The
-- runs' count is read in the statement's snapshot, before the cascade.
WITH gone AS (DELETE FROM sweeps WHERE sweep_id = $1 AND ended_at IS NOT NULL
              RETURNING sweep_id)
SELECT (SELECT count(*) FROM gone), (SELECT count(*) FROM runs r WHERE r.sweep_id = $1)

-- name: list_sweeps
-- $1 state ('' = all), $2 created_at text of the last row ('' = first page), $3 its id, $4 limit.
{{sweep_select}}
WHERE ($1 = '' OR s.state = $1)
  AND ($2 = '' OR (s.created_at, s.sweep_id) < ($2::timestamptz, $3::uuid))
ORDER BY s.created_at DESC, s.sweep_id DESC LIMIT $4

-- name: mark_sweep_cancelled
UPDATE sweeps SET state = 'CANCELLED' WHERE sweep_id = $1 AND state = 'ACTIVE'

-- name: cancel_pending_runs
-- $1 sweep, $2 reason: PENDING runs end CANCELLED, one event each.
WITH c AS (UPDATE runs SET state = 'CANCELLED', ended_at = now(), updated_at = now()
           WHERE sweep_id = $1 AND state = 'PENDING'
           RETURNING run_id, sweep_id, attempt, lease_epoch)
INSERT INTO events (run_id, sweep_id, from_state, to_state, attempt, lease_epoch, reason)
SELECT run_id, sweep_id, 'PENDING', 'CANCELLED', attempt, lease_epoch, $2 FROM c

-- name: flag_live_runs_cancelled
-- $1 sweep: LEASED/RUNNING runs end at their next heartbeat.
UPDATE runs SET cancel_requested = true, updated_at = now()
WHERE sweep_id = $1 AND state IN ('LEASED', 'RUNNING') AND NOT cancel_requested

-- name: refresh_sweep_state
-- $1 sweep. Ends it once none of its runs is unfinished. Two runs ending at once may each see
-- the other still live and both skip it; finalize_sweeps (run by the reaper) catches that.
UPDATE sweeps s SET ended_at = now(),
  state = CASE WHEN s.state = 'CANCELLED' THEN 'CANCELLED'
               WHEN EXISTS (SELECT 1 FROM runs WHERE sweep_id = s.sweep_id AND state = 'FAILED')
               THEN 'FAILED' ELSE 'SUCCEEDED' END
WHERE s.sweep_id = $1 AND s.ended_at IS NULL AND {{no_unfinished_runs}}

-- name: finalize_sweeps
-- Every open sweep with no unfinished run ends (the reaper's pass).
UPDATE sweeps s SET ended_at = now(),
  state = CASE WHEN s.state = 'CANCELLED' THEN 'CANCELLED'
               WHEN EXISTS (SELECT 1 FROM runs WHERE sweep_id = s.sweep_id AND state = 'FAILED')
               THEN 'FAILED' ELSE 'SUCCEEDED' END
WHERE s.ended_at IS NULL AND {{no_unfinished_runs}}

-- name: get_run
SELECT {{run_columns}} FROM runs r WHERE r.run_id = $1

-- name: list_runs
-- $1 sweep, $2 states text[] ('{}' = all), $3 last ordinal, $4 limit.
SELECT {{run_columns}}, r.ordinal FROM runs r
WHERE r.sweep_id = $1 AND (cardinality($2::text[]) = 0 OR r.state = ANY($2::text[]))
  AND r.ordinal > $3
ORDER BY r.ordinal LIMIT $4

-- name: list_run_states
-- $1 sweep, $2 last ordinal, $3 limit: a watch snapshot's page (no spec is read).
SELECT r.run_id, r.state, r.attempt, r.latest_step, r.ordinal FROM runs r
WHERE r.sweep_id = $1 AND r.ordinal > $2
ORDER BY r.ordinal LIMIT $3

-- name: sweep_exists
SELECT 1 FROM sweeps WHERE sweep_id = $1

-- name: count_owner_load
-- $1 owner: its ACTIVE sweeps and their unended runs (the per-identity limits at submission).
-- unprepared: not on the lease path.
SELECT count(DISTINCT s.sweep_id), count(r.run_id) FROM sweeps s
LEFT JOIN runs r ON r.sweep_id = s.sweep_id AND r.state IN ('PENDING', 'LEASED', 'RUNNING')
WHERE s.owner = $1 AND s.state = 'ACTIVE'
