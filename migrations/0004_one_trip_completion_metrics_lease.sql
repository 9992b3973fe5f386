-- 0004: a successful CompleteRun and a ReportMetrics batch each in one round trip, and a lease
-- whose fair-share count no longer rereads every run leased since the last vacuum.
-- Before, each was a transaction of 4-7 statements (BEGIN, lock the run, check the fencing token
-- in C++, write, event, sweep refresh, read back, COMMIT); under 32 concurrent workers the round
-- trips and their context switches, not the writes, were most of the cost. The checks are the
-- same ones, made under the same row lock, in the same order:
--   SQLSTATE P0002: the run does not exist;
--   SQLSTATE PR001: the fencing token is stale or the lease was lost (message says which).
-- Failed completions keep the multi-statement path: their retry policy lives in the scheduler.

-- The leases the reaper and fair share walk churn on every lease and completion; vacuum the runs
-- table after a few hundred changed rows rather than 20% of it, so that the partial indexes
-- the lease path scans do not fill with dead entries.
ALTER TABLE runs SET (autovacuum_vacuum_scale_factor = 0.0, autovacuum_vacuum_threshold = 500,
                      autovacuum_analyze_scale_factor = 0.05, autovacuum_vacuum_cost_delay = 0);

CREATE FUNCTION complete_run_success(p_run uuid, p_epoch bigint, p_train_bpc double precision,
                                     p_val_bpc double precision, p_tokens bigint,
                                     p_steps bigint, p_measured_m double precision,
                                     p_wall_seconds double precision, p_peak_memory bigint,
                                     p_tokens_per_second double precision,
                                     p_checkpoint_step bigint, p_checkpoint_uri text)
RETURNS SETOF runs LANGUAGE plpgsql AS $$
DECLARE
  v runs%ROWTYPE;
BEGIN
  SELECT * INTO v FROM runs WHERE run_id = p_run FOR UPDATE;
  IF NOT FOUND THEN
    RAISE EXCEPTION 'run % not found', p_run USING ERRCODE = 'P0002';
  END IF;
  IF v.lease_epoch <> p_epoch THEN
    RAISE EXCEPTION USING ERRCODE = 'PR001',
      MESSAGE = format('lease epoch %s is stale; current is %s', p_epoch, v.lease_epoch);
  END IF;
  -- Otherwise this epoch already completed (or was cancelled): the run is returned as it is.
  IF v.state IN ('LEASED', 'RUNNING') THEN
    UPDATE runs SET state = 'SUCCEEDED', final_train_bpc = p_train_bpc,
      final_val_bpc = p_val_bpc, summary_tokens = p_tokens, summary_steps = p_steps,
      measured_flops_per_token = p_measured_m, wall_seconds = p_wall_seconds,
      peak_memory_bytes = p_peak_memory, tokens_per_second = p_tokens_per_second,
      checkpoint_step = coalesce(p_checkpoint_step, checkpoint_step),
      checkpoint_uri = coalesce(p_checkpoint_uri, checkpoint_uri),
      latest_step = greatest(latest_step, coalesce(p_steps, 0)), lease_owner = NULL,
      lease_expires_at = NULL, cancel_requested = false,
      started_at = coalesce(started_at, now()), ended_at = now(), updated_at = now()
    WHERE run_id = p_run;
    INSERT INTO events (run_id, sweep_id, from_state, to_state, attempt, lease_epoch, worker_id,
                        reason)
    VALUES (p_run, v.sweep_id, v.state, 'SUCCEEDED', v.attempt, v.lease_epoch, v.lease_owner,
            'succeeded');
    -- The sweep ends with its last unfinished run (not locked: see EndSweepIfDone).
    UPDATE sweeps s SET ended_at = now(), state = CASE WHEN s.state = 'CANCELLED' THEN
      'CANCELLED' WHEN EXISTS (SELECT 1 FROM runs WHERE sweep_id = s.sweep_id AND
      state = 'FAILED') THEN 'FAILED' ELSE 'SUCCEEDED' END
    WHERE s.sweep_id = v.sweep_id AND s.ended_at IS NULL AND NOT EXISTS (SELECT 1 FROM runs
      WHERE sweep_id = s.sweep_id AND state IN ('PENDING', 'LEASED', 'RUNNING'));
  END IF;
  RETURN QUERY SELECT * FROM runs WHERE run_id = p_run;
END $$;

-- Stores a batch of points (the JSON array pg::MetricsJson writes) for the run under lease
-- p_epoch: points already stored for (run, step) are skipped, and the run's latest step and
-- validation BPC follow the points stored. Returns how many were stored. Points may still
-- arrive for a run that just ended under this same lease (the last batch races CompleteRun);
-- a run back in PENDING has no writer.
CREATE FUNCTION append_metrics(p_run uuid, p_epoch bigint, p_points jsonb)
RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
  v_epoch bigint;
  v_state text;
  v_stored integer;
BEGIN
  SELECT lease_epoch, state INTO v_epoch, v_state FROM runs WHERE run_id = p_run FOR UPDATE;
  IF NOT FOUND THEN
    RAISE EXCEPTION 'run % not found', p_run USING ERRCODE = 'P0002';
  END IF;
  IF v_epoch <> p_epoch THEN
    RAISE EXCEPTION USING ERRCODE = 'PR001',
      MESSAGE = format('lease epoch %s is stale; current is %s', p_epoch, v_epoch);
  END IF;
  IF v_state = 'PENDING' THEN
    RAISE EXCEPTION USING ERRCODE = 'PR001', MESSAGE = 'the lease was lost (run is PENDING)';
  END IF;
  WITH input AS (SELECT * FROM jsonb_to_recordset(p_points) AS x(step bigint, attempt integer,
                   tokens bigint, unique_tokens bigint, epoch float8, train_bpc float8,
                   val_bpc float8, learning_rate float8, grad_norm float8, aux_loss float8,
                   z_loss float8, tokens_per_second float8, flops_per_second float8,
                   flops float8, expert_load jsonb, logged_us bigint)),
  ins AS (INSERT INTO metrics (run_id, step, attempt, tokens, unique_tokens, epoch, train_bpc,
                               val_bpc, learning_rate, grad_norm, aux_loss, z_loss,
                               tokens_per_second, flops_per_second, flops, expert_load,
                               logged_at)
          SELECT p_run, step, attempt, tokens, unique_tokens, epoch, train_bpc, val_bpc,
                 learning_rate, grad_norm, aux_loss, z_loss, tokens_per_second,
                 flops_per_second, flops, expert_load,
                 CASE WHEN logged_us IS NULL THEN NULL ELSE to_timestamp(logged_us / 1000000.0)
                 END
          FROM input ON CONFLICT DO NOTHING RETURNING step, val_bpc),
  progress AS (UPDATE runs SET latest_val_bpc = coalesce((SELECT val_bpc FROM ins
                 WHERE val_bpc IS NOT NULL ORDER BY step DESC LIMIT 1), latest_val_bpc),
               latest_step = greatest(latest_step, (SELECT max(step) FROM ins))
               WHERE run_id = p_run AND EXISTS (SELECT 1 FROM ins))
  SELECT count(*) INTO v_stored FROM ins;
  RETURN v_stored;
END $$;

-- Leasing, as in 0003, but fair share counts the live runs of each open sweep with an index
-- scan on runs_live_by_sweep. 0003 counted all live runs in one bitmap scan, and bitmap scans
-- never mark dead index entries: every lease re-read the heap page of every run leased since
-- the last vacuum (5.8 of 7.6 ms per lease after 6,000 leases, growing without bound).
-- Plain and index-only scans mark them, so later leases skip them.
CREATE OR REPLACE FUNCTION lease_next_run(p_worker uuid, p_cpu_threads integer,
                                          p_host_memory bigint, p_gpu_memory bigint[],
                                          p_ttl_seconds double precision,
                                          p_gpu_indices integer[], p_cpu_device integer)
RETURNS SETOF runs LANGUAGE plpgsql SET enable_bitmapscan = off AS $$
DECLARE
  v_sweep uuid;
BEGIN
  UPDATE workers SET last_seen_at = now() WHERE worker_id = p_worker;
  IF NOT FOUND THEN
    RAISE EXCEPTION 'worker % is not registered', p_worker USING ERRCODE = 'P0002';
  END IF;
  FOR v_sweep IN
    SELECT s.sweep_id FROM sweeps s CROSS JOIN LATERAL (SELECT count(*) AS n FROM runs l
      WHERE l.sweep_id = s.sweep_id AND l.state IN ('LEASED', 'RUNNING')) live
    WHERE s.ended_at IS NULL AND EXISTS (SELECT 1 FROM runs r WHERE r.sweep_id = s.sweep_id
      AND r.state = 'PENDING')
    ORDER BY s.priority DESC, live.n, s.created_at, s.sweep_id LIMIT 32
  LOOP
    RETURN QUERY
      WITH pick AS (
        SELECT r.run_id FROM runs r WHERE r.sweep_id = v_sweep AND r.state = 'PENDING'
          AND r.not_before <= now() AND (p_host_memory = 0 OR r.memory_bytes <= p_host_memory)
          AND ((r.gpus = 0 AND greatest(r.cpu_threads, 1) <= p_cpu_threads) OR (r.gpus > 0
            AND r.gpus <= cardinality(p_gpu_memory) AND p_gpu_memory[r.gpus] >= r.gpu_memory_bytes))
        ORDER BY r.ordinal LIMIT 1 FOR UPDATE SKIP LOCKED),
      taken AS (
        UPDATE runs r SET state = 'LEASED', lease_owner = p_worker, lease_epoch = r.lease_epoch + 1,
          lease_expires_at = now() + make_interval(secs => p_ttl_seconds),
          cancel_requested = false, updated_at = now(),
          device_indices = CASE WHEN r.gpus = 0 THEN ARRAY[p_cpu_device]
                                ELSE p_gpu_indices[1:r.gpus] END
        FROM pick WHERE r.run_id = pick.run_id RETURNING r.*),
      ev AS (
        INSERT INTO events (run_id, sweep_id, from_state, to_state, attempt, lease_epoch,
                            worker_id, reason)
        SELECT run_id, sweep_id, 'PENDING', 'LEASED', attempt, lease_epoch, p_worker, 'leased'
        FROM taken)
      SELECT * FROM taken;
    IF FOUND THEN
      RETURN;
    END IF;
  END LOOP;
END $$;
