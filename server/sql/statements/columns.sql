-- Fragments: column lists and conditions several statements share, pasted where a statement
-- says {{name}} (pg_statements.cc). A fragment is not a statement and is never prepared.

-- fragment: run_columns
-- A Run (table alias r), read by pg::RunFromRow(); times as microseconds since the epoch.
r.run_id::text AS run_id, r.sweep_id::text AS sweep_id, r.spec_bytes, r.state, r.priority,
r.attempt, r.max_attempts, r.preemptions, r.lease_owner::text AS lease_owner, r.lease_epoch,
(extract(epoch FROM r.lease_expires_at) * 1000000)::bigint AS lease_expires_us,
r.device_indices::text AS devices, r.cancel_requested, r.checkpoint_step, r.checkpoint_uri,
(extract(epoch FROM r.checkpoint_at) * 1000000)::bigint AS checkpoint_us, r.failure_class,
r.failure_code, r.failure_message, r.final_train_bpc, r.final_val_bpc, r.summary_tokens,
r.summary_steps, r.measured_flops_per_token, r.wall_seconds, r.peak_memory_bytes,
r.tokens_per_second, r.final_eval_bpc::text AS final_eval_bpc, r.dataset_digest, r.latest_step,
r.latest_val_bpc, r.peak_device_memory_bytes, r.estimated_device_memory_bytes,
(extract(epoch FROM r.created_at) * 1000000)::bigint AS created_us,
(extract(epoch FROM r.started_at) * 1000000)::bigint AS started_us,
(extract(epoch FROM r.ended_at) * 1000000)::bigint AS ended_us

-- fragment: sweep_select
-- A Sweep with its run counts (alias s, lateral c), read by pg::SweepFromRow().
SELECT s.sweep_id::text AS sweep_id, s.spec_bytes, s.state, s.owner,
       coalesce(s.idempotency_key, '') AS idempotency_key, s.created_at::text AS created_text,
       (extract(epoch FROM s.created_at) * 1000000)::bigint AS created_us,
       (extract(epoch FROM s.ended_at) * 1000000)::bigint AS ended_us,
       c.pending, c.leased, c.running, c.succeeded, c.failed, c.cancelled, c.total
FROM sweeps s CROSS JOIN LATERAL (
  SELECT count(*) FILTER (WHERE state = 'PENDING') AS pending,
         count(*) FILTER (WHERE state = 'LEASED') AS leased,
         count(*) FILTER (WHERE state = 'RUNNING') AS running,
         count(*) FILTER (WHERE state = 'SUCCEEDED') AS succeeded,
         count(*) FILTER (WHERE state = 'FAILED') AS failed,
         count(*) FILTER (WHERE state = 'CANCELLED') AS cancelled,
         count(*) AS total
  FROM runs WHERE runs.sweep_id = s.sweep_id) c

-- fragment: no_unfinished_runs
-- "Sweep s has no pending or live run", through the two partial indexes (runs_pending_by_sweep
-- from its last ordinal down, past the dead entries of runs leased since the last vacuum at its
-- front; runs_live_by_sweep), as complete_runs_success (server/sql/) asks it.
NOT EXISTS (SELECT 1 FROM (SELECT 1 FROM runs WHERE sweep_id = s.sweep_id AND state = 'PENDING'
                           ORDER BY ordinal DESC LIMIT 1) last_pending)
AND NOT EXISTS (SELECT 1 FROM runs WHERE sweep_id = s.sweep_id AND state IN ('LEASED', 'RUNNING'))
