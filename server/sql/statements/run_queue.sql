-- RunQueue's statements: leases, heartbeats, metrics, completions, the reaper and retention
-- (postgres_run_queue.cc, postgres_run_queue_batches.cc). The heavy lifting is in the functions
-- of server/sql/ that these call.

-- name: lease_runs
-- One statement, one round trip, its own transaction: lease_runs() touches the workers, ranks
-- the open sweeps with pending work that fits (priority, then fewest live runs — fair share —
-- then oldest), shares the batch among them as leasing one run at a time would, and takes each
-- sweep's share in grid order (FOR UPDATE SKIP LOCKED) with new fencing tokens, leases, the
-- granted devices and events. $1 workers (uuid[]), $2 their CPU device indices (integer[]), $3
-- their GPU indices in the order of $6 (text[] of integer[] literals), $4 CPU threads offered,
-- $5 host memory (0 = unknown), $6 free GPU memory largest first (bigint[]; unknown = max), $7
-- ttl seconds, $8 their request ids (text[], NULL = none). One row per leased request (request
-- is 1-based) and one with NULL run columns per unregistered worker.
SELECT l.request, {{run_columns}}, r.gpus
FROM lease_runs($1::uuid[], $2::integer[], $3::text[], $4::integer, $5::bigint, $6::bigint[],
                $7::float8, $8::text[]) l
CROSS JOIN LATERAL (SELECT (l.run).*) r

-- name: renew_retried_lease
-- A LeaseRun retried because its answer was lost (LeaseRequest::retry): the run worker $1 holds
-- LEASED under request id $2 — granted, never heartbeated, not lapsed — gets its lease renewed
-- to now() + $3 seconds and is answered again (same epoch; no event: the lease is the one
-- already recorded). No row: no such lease, lease as usual. Only retries send it, so the live
-- leases are scanned (runs_live_leases) rather than every lease paying for an index.
UPDATE runs r SET lease_expires_at = now() + make_interval(secs => $3), updated_at = now()
WHERE r.state = 'LEASED' AND r.lease_owner = $1::uuid AND r.lease_request_id = $2
  AND r.lease_expires_at > now()
RETURNING {{run_columns}}

-- name: lock_run
-- The row every writer of a run locks first (its fencing token is checked against it).
SELECT run_id::text, sweep_id::text, state, lease_epoch, lease_owner::text, cancel_requested,
       attempt, max_attempts
FROM runs WHERE run_id = $1 FOR UPDATE

-- name: insert_event
-- $1 run, $2 sweep, $3 from, $4 to, $5 attempt, $6 epoch, $7 worker (NULL), $8 reason.
INSERT INTO events (run_id, sweep_id, from_state, to_state, attempt, lease_epoch, worker_id,
                    reason)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8)

-- name: heartbeat
-- $1 run, $2 ttl seconds, $3 step, $4 checkpoint step (NULL), $5 checkpoint uri (NULL), $6
-- worker (its last_seen_at is refreshed too, so ListWorkers shows busy workers).
WITH seen AS (UPDATE workers SET last_seen_at = now() WHERE worker_id = $6)
UPDATE runs SET state = 'RUNNING', lease_expires_at = now() + make_interval(secs => $2),
  started_at = coalesce(started_at, now()), latest_step = greatest(latest_step, $3),
  checkpoint_step = coalesce($4, checkpoint_step),
  checkpoint_uri = coalesce($5, checkpoint_uri),
  checkpoint_at = CASE WHEN $4::bigint IS NULL THEN checkpoint_at ELSE now() END,
  updated_at = now()
WHERE run_id = $1 RETURNING (extract(epoch FROM lease_expires_at) * 1000000)::bigint

-- name: cancel_run_now
UPDATE runs SET state = 'CANCELLED', cancel_requested = false, lease_owner = NULL,
  lease_expires_at = NULL, lease_request_id = NULL, ended_at = now(), updated_at = now()
WHERE run_id = $1

-- name: append_metric_arrays
-- $1 run, $2 lease epoch, $3 steps strictly increasing, $4..$20 one array per column
-- (pg::MetricArrays, append_metric_arrays.sql): the count stored.
SELECT append_metric_arrays($1::uuid, $2::bigint, $3::boolean, $4::bigint[], $5::integer[],
                            $6::bigint[], $7::bigint[], $8::float8[], $9::float8[],
                            $10::float8[], $11::float8[], $12::float8[], $13::float8[],
                            $14::float8[], $15::float8[], $16::float8[], $17::float8[],
                            $18::jsonb[], $19::jsonb[], $20::bigint[])

-- name: complete_runs_success
-- Successes in a batch (complete_runs_success.sql): $1 runs (uuid[]), $2 lease epochs, $3..$10
-- train and validation BPC, tokens, steps, measured M, wall seconds, peak memory, tokens/s, $11
-- checkpoint steps, $12 checkpoint uris, $13 final BPC per evaluation set (jsonb), $14 dataset
-- digests, $15 peak device memory, $16 estimated device memory (bytes) (arrays, NULL = not
-- reported). One row per request (1-based) with its outcome
-- (completed, unchanged, invalid, stale, not_found), why an invalid summary disagrees with the
-- plan, and the run as it ends up (NULL when not found).
SELECT l.request, l.outcome, l.reason, {{run_columns}}
FROM complete_runs_success($1::uuid[], $2::bigint[], $3::float8[], $4::float8[], $5::bigint[],
                           $6::bigint[], $7::float8[], $8::float8[], $9::bigint[],
                           $10::float8[], $11::bigint[], $12::text[], $13::jsonb[],
                           $14::text[], $15::bigint[], $16::bigint[]) l
CROSS JOIN LATERAL (SELECT (l.run).*) r

-- name: complete_failure
-- $1 run, $2 next state, $3 next attempt, $4 delay seconds, $5 class, $6 code, $7 message, $8
-- checkpoint step (NULL), $9 checkpoint uri (NULL), $10 preemptions.
UPDATE runs SET state = $2, attempt = $3, preemptions = $10,
  not_before = now() + make_interval(secs => $4), failure_class = $5, failure_code = $6,
  failure_message = $7, checkpoint_step = coalesce($8, checkpoint_step),
  checkpoint_uri = coalesce($9, checkpoint_uri), lease_owner = NULL, lease_expires_at = NULL,
  lease_request_id = NULL, cancel_requested = false, ended_at = CASE WHEN $2 = 'PENDING' THEN NULL ELSE now() END,
  updated_at = now()
WHERE run_id = $1

-- name: reap_expired
-- $1 limit, $2 the failure message of a lapse during an outage (kOutageLapseMessage).
-- Expired leases: PENDING with attempt + 1, or FAILED (LEASE_EXPIRED) past max_attempts, or
-- CANCELLED when cancellation was pending; one event each. After an outage (reaper_liveness,
-- record_reaper_pass) nothing is reaped before reap_from, and a lease that lapsed before
-- charge_from goes back to PENDING at the same attempt (event "lease expired during an outage").
WITH live AS (
  SELECT coalesce(max(charge_from), '-infinity') AS charge_from,
         coalesce(max(reap_from), '-infinity') AS reap_from
  FROM reaper_liveness),
expired AS (
  SELECT r.run_id, r.state AS old_state, r.lease_owner AS old_owner,
         r.lease_expires_at < live.charge_from AS outage
  FROM runs r CROSS JOIN live
  WHERE r.state IN ('LEASED', 'RUNNING') AND r.lease_expires_at < now()
    AND now() >= live.reap_from
  ORDER BY r.lease_expires_at LIMIT $1 FOR UPDATE OF r SKIP LOCKED),
upd AS (
  UPDATE runs r SET
    state = CASE WHEN r.cancel_requested THEN 'CANCELLED'
                 WHEN NOT e.outage AND r.attempt >= r.max_attempts THEN 'FAILED'
                 ELSE 'PENDING' END,
    attempt = CASE WHEN r.cancel_requested OR e.outage OR r.attempt >= r.max_attempts
                   THEN r.attempt ELSE r.attempt + 1 END,
    failure_class = CASE WHEN r.cancel_requested THEN r.failure_class
                         ELSE 'LEASE_EXPIRED' END,
    failure_message = CASE WHEN r.cancel_requested THEN r.failure_message
                           WHEN e.outage THEN $2
                           ELSE 'lease expired without a heartbeat' END,
    ended_at = CASE WHEN r.cancel_requested OR (NOT e.outage AND r.attempt >= r.max_attempts)
                    THEN now() ELSE NULL END,
    cancel_requested = false, lease_owner = NULL, lease_expires_at = NULL,
    lease_request_id = NULL, updated_at = now()
  FROM expired e WHERE r.run_id = e.run_id
  RETURNING r.run_id, r.sweep_id, r.state, r.attempt, r.lease_epoch, e.old_state, e.old_owner,
            e.outage),
ev AS (
  INSERT INTO events (run_id, sweep_id, from_state, to_state, attempt, lease_epoch, worker_id,
                      reason)
  SELECT run_id, sweep_id, old_state, state, attempt, lease_epoch, old_owner,
         CASE WHEN outage AND state = 'PENDING' THEN 'lease expired during an outage'
              ELSE 'lease expired' END
  FROM upd)
SELECT sweep_id::text, state, outage FROM upd

-- name: record_reaper_pass
-- $1 caller knows of an outage, $2 max silence s, $3 lease TTL s, $4 grace s
-- (RunQueue::RecordReaperPass; server/sql/record_reaper_pass.sql). Times in microseconds, NULL
-- for ±infinity (which no bigint holds).
SELECT outage,
       CASE WHEN isfinite(up_since) THEN (extract(epoch FROM up_since) * 1000000)::bigint END
         AS up_since_us,
       CASE WHEN isfinite(charge_from) THEN (extract(epoch FROM charge_from) * 1000000)::bigint
         END AS charge_from_us,
       CASE WHEN isfinite(reap_from) THEN (extract(epoch FROM reap_from) * 1000000)::bigint END
         AS reap_from_us
FROM record_reaper_pass($1::boolean, $2::float8, $3::float8, $4::float8)

-- name: apply_telemetry_retention
-- $1 metrics age s, $2 points kept per run, $3 events age s, $4 workers age s, $5 sweeps per
-- pass (TelemetryRetention; apply_telemetry_retention.sql).
SELECT * FROM apply_telemetry_retention($1::float8, $2::integer, $3::float8, $4::float8,
                                        $5::integer)
