-- 0008: the lease path's queue scan made independent of statistics, and three statements of
-- every lease+completion cycle that bought nothing. Under 32 workers about half of a cycle's
-- PostgreSQL time is per statement (plan start-up, locks, triggers) rather than per row; each
-- of these ran once or eight times per batch.
--
-- events.run_id's foreign key: every event insert ran its check (a lookup with a plan start-up
-- of its own, after the statement) against a run that the same transaction had just written
-- (created, or locked and updated), as every statement that appends an event does. What it
-- gave beyond that check, cascading the deletion of a sweep's runs to their events, a
-- statement trigger does; for their metrics too, which never had a key (a sweep deleted in
-- psql left its curves behind).
ALTER TABLE events DROP CONSTRAINT events_run_id_fkey;
-- By run_id = ANY: through each table's index on run_id whatever the planner thinks of the
-- transition table against a metrics table of ~100M rows.
CREATE FUNCTION delete_records_of_deleted_runs() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  v_runs uuid[] := ARRAY(SELECT run_id FROM deleted_runs);
BEGIN
  DELETE FROM events WHERE run_id = ANY (v_runs);
  DELETE FROM metrics WHERE run_id = ANY (v_runs);
  RETURN NULL;
END $$;
CREATE TRIGGER runs_deleted_with_records AFTER DELETE ON runs
  REFERENCING OLD TABLE AS deleted_runs
  FOR EACH STATEMENT EXECUTE FUNCTION delete_records_of_deleted_runs();

-- The queue a lease takes from: a sweep's pending runs in grid order. runs_pending_by_sweep
-- (0001) is that index, but while the statistics still say that (nearly) every run is pending
-- (a fresh install, until autovacuum next analyzes runs) the planner costs it the same as the
-- UNIQUE (sweep_id, ordinal) index over all runs, and may keep the latter in the plan cached
-- for the connection (plan_cache_mode = force_generic_plan). Each lease then walks, heap row by
-- heap row, every run its sweep has already leased or finished: seen at 4.3 ms of a 4.5 ms
-- batch 300 runs into a sweep, growing with the sweep. Keyed on ordinal::bigint, this index is
-- the only one that gives that order, so no statistics can choose otherwise. Runs enter it
-- only while pending (at submission and when requeued).
CREATE INDEX runs_pending_queue ON runs (sweep_id, (ordinal::bigint)) WHERE state = 'PENDING';

-- lease_runs as in 0006, except that it takes each sweep's share through runs_pending_queue
-- and asks for the rows of unregistered workers only when there are some (a worker registers
-- once and leases thousands of times).
CREATE OR REPLACE FUNCTION lease_runs(p_workers uuid[], p_cpu_devices integer[], p_gpu_indices text[],
                           p_cpu_threads integer, p_host_memory bigint,
                           p_gpu_memory bigint[], p_ttl_seconds double precision)
RETURNS TABLE (request integer, run runs) LANGUAGE plpgsql
SET enable_bitmapscan = off SET plan_cache_mode = force_generic_plan AS $$
DECLARE
  v_waiting integer[];  -- requests of registered workers still without a run, in order
  v_runs uuid[];        -- the runs a round takes, in fair-share order
  v_leased integer;
  v_round integer := 0;
  v_short uuid[] := '{}';  -- sweeps that had fewer fitting runs free than their share
  v_short_now uuid[];
BEGIN
  -- A worker asking again within a second is not rewritten: last_seen_at feeds a live window
  -- of a minute, and a busy worker asks many times a second.
  WITH touched AS (UPDATE workers SET last_seen_at = now() WHERE worker_id = ANY (p_workers)
                     AND last_seen_at < now() - interval '1 second')
  SELECT coalesce(array_agg(q.i::integer ORDER BY q.i), '{}') INTO v_waiting
  FROM unnest(p_workers) WITH ORDINALITY AS q(worker_id, i)
  WHERE EXISTS (SELECT 1 FROM workers w WHERE w.worker_id = q.worker_id);
  IF cardinality(v_waiting) < cardinality(p_workers) THEN
    RETURN QUERY SELECT q.i::integer, NULL::runs FROM unnest(p_workers) WITH ORDINALITY AS q(w, i)
      WHERE q.i <> ALL (v_waiting);
  END IF;
  WHILE cardinality(v_waiting) > 0 AND v_round < 8 LOOP
    v_round := v_round + 1;
    WITH open AS (
      SELECT s.sweep_id, s.priority, s.created_at, live.n FROM sweeps s CROSS JOIN LATERAL (
        SELECT count(*) AS n FROM runs l WHERE l.sweep_id = s.sweep_id
          AND l.state IN ('LEASED', 'RUNNING')) live
      WHERE s.ended_at IS NULL AND s.sweep_id <> ALL (v_short) AND EXISTS (
        SELECT 1 FROM (SELECT 1 FROM runs r WHERE r.sweep_id = s.sweep_id
          AND r.state = 'PENDING' AND r.not_before <= now()
          AND (p_host_memory = 0 OR r.memory_bytes <= p_host_memory)
          AND ((r.gpus = 0 AND greatest(r.cpu_threads, 1) <= p_cpu_threads) OR (r.gpus > 0
            AND r.gpus <= cardinality(p_gpu_memory)
            AND p_gpu_memory[r.gpus] >= r.gpu_memory_bytes))
          ORDER BY r.ordinal DESC LIMIT 1) fits)
      ORDER BY s.priority DESC, live.n, s.created_at, s.sweep_id LIMIT 32),
    share AS (
      SELECT sweep_id, count(*) AS runs FROM (
        SELECT o.sweep_id FROM open o CROSS JOIN generate_series(1, cardinality(v_waiting)) j
        ORDER BY o.priority DESC, o.n + j, o.created_at, o.sweep_id
        LIMIT cardinality(v_waiting)) slots
      GROUP BY sweep_id),
    -- Each sweep's share in grid order, locked as read: a run another batch holds is skipped
    -- and the next one taken in its place. Ordered by ordinal::bigint, which only
    -- runs_pending_queue serves (see there).
    locked AS (
      SELECT c.run_id, o.priority, o.n + row_number() OVER (PARTITION BY o.sweep_id
                                                           ORDER BY c.ordinal) AS rank_live,
             o.created_at, o.sweep_id
      FROM share a JOIN open o ON o.sweep_id = a.sweep_id CROSS JOIN LATERAL (
        SELECT r.run_id, r.ordinal FROM runs r
        WHERE r.sweep_id = o.sweep_id AND r.state = 'PENDING' AND r.not_before <= now()
          AND (p_host_memory = 0 OR r.memory_bytes <= p_host_memory)
          AND ((r.gpus = 0 AND greatest(r.cpu_threads, 1) <= p_cpu_threads) OR (r.gpus > 0
            AND r.gpus <= cardinality(p_gpu_memory)
            AND p_gpu_memory[r.gpus] >= r.gpu_memory_bytes))
        ORDER BY r.ordinal::bigint LIMIT a.runs FOR UPDATE SKIP LOCKED) c)
    SELECT coalesce(array_agg(l.run_id ORDER BY l.priority DESC, l.rank_live, l.created_at,
                              l.sweep_id), '{}'),
           ARRAY(SELECT a.sweep_id FROM share a WHERE a.runs > (SELECT count(*) FROM locked l
                   WHERE l.sweep_id = a.sweep_id))
      INTO v_runs, v_short_now FROM locked l;
    v_short := v_short || v_short_now;
    v_leased := cardinality(v_runs);
    -- Nothing taken and no sweep came up short: no pending run fits. Nothing taken but some
    -- sweeps short (their last runs held by another batch): try the others.
    EXIT WHEN v_leased = 0 AND cardinality(v_short_now) = 0;
    CONTINUE WHEN v_leased = 0;
    -- The k-th run of the order goes to the k-th waiting request. By primary key, so that the
    -- planner never weighs a scan of the queue against a guess of the batch's size.
    RETURN QUERY
    WITH taken AS (
      UPDATE runs r SET state = 'LEASED',
        lease_owner = p_workers[v_waiting[array_position(v_runs, r.run_id)]],
        lease_epoch = r.lease_epoch + 1,
        lease_expires_at = now() + make_interval(secs => p_ttl_seconds),
        cancel_requested = false, updated_at = now(),
        device_indices = CASE WHEN r.gpus = 0
          THEN ARRAY[p_cpu_devices[v_waiting[array_position(v_runs, r.run_id)]]]
          ELSE (p_gpu_indices[v_waiting[array_position(v_runs, r.run_id)]]::integer[])[1:r.gpus]
          END
      WHERE r.run_id = ANY (v_runs) RETURNING r),
    ev AS (
      INSERT INTO events (run_id, sweep_id, from_state, to_state, attempt, lease_epoch,
                          worker_id, reason)
      SELECT (t.r).run_id, (t.r).sweep_id, 'PENDING', 'LEASED', (t.r).attempt,
             (t.r).lease_epoch, (t.r).lease_owner, 'leased' FROM taken t)
    SELECT v_waiting[array_position(v_runs, (t.r).run_id)], t.r FROM taken t;
    -- Pairing hands runs to the waiting requests in order: the first v_leased are served.
    v_waiting := v_waiting[v_leased + 1:];
  END LOOP;
END $$;

-- complete_runs_success as in 0006, except that ending the sweeps whose last run this batch
-- ends is part of the statement that ends the runs, not a statement of its own.
CREATE OR REPLACE FUNCTION complete_runs_success(p_runs uuid[], p_epochs bigint[],
                                      p_train_bpc double precision[],
                                      p_val_bpc double precision[], p_tokens bigint[],
                                      p_steps bigint[], p_measured_m double precision[],
                                      p_wall_seconds double precision[],
                                      p_peak_memory bigint[],
                                      p_tokens_per_second double precision[],
                                      p_checkpoint_step bigint[], p_checkpoint_uri text[])
RETURNS TABLE (request integer, outcome text, run runs) LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan AS $$
BEGIN
  -- Every writer of a run locks its row first; in run_id order, so two batches cannot deadlock.
  PERFORM 1 FROM runs WHERE run_id = ANY (p_runs) ORDER BY run_id FOR UPDATE;
  RETURN QUERY
  WITH input AS (
    SELECT * FROM unnest(p_runs, p_epochs, p_train_bpc, p_val_bpc, p_tokens, p_steps,
                         p_measured_m, p_wall_seconds, p_peak_memory, p_tokens_per_second,
                         p_checkpoint_step, p_checkpoint_uri)
      WITH ORDINALITY AS q(run_id, epoch, train_bpc, val_bpc, tokens, steps, measured_m,
                           wall_seconds, peak_memory, tokens_per_second, checkpoint_step,
                           checkpoint_uri, i)),
  ending AS (
    SELECT DISTINCT ON (q.run_id) q.*, r.state AS from_state, r.sweep_id, r.attempt,
           r.lease_owner
    FROM input q JOIN runs r ON r.run_id = q.run_id AND r.lease_epoch = q.epoch
    WHERE r.state IN ('LEASED', 'RUNNING') ORDER BY q.run_id, q.i),
  done AS (
    UPDATE runs r SET state = 'SUCCEEDED', final_train_bpc = e.train_bpc,
      final_val_bpc = e.val_bpc, summary_tokens = e.tokens, summary_steps = e.steps,
      measured_flops_per_token = e.measured_m, wall_seconds = e.wall_seconds,
      peak_memory_bytes = e.peak_memory, tokens_per_second = e.tokens_per_second,
      checkpoint_step = coalesce(e.checkpoint_step, r.checkpoint_step),
      checkpoint_uri = coalesce(e.checkpoint_uri, r.checkpoint_uri),
      latest_step = greatest(r.latest_step, coalesce(e.steps, 0)), lease_owner = NULL,
      lease_expires_at = NULL, cancel_requested = false,
      started_at = coalesce(r.started_at, now()), ended_at = now(), updated_at = now()
    FROM ending e WHERE r.run_id = e.run_id RETURNING e.i, r AS ended),
  ev AS (
    INSERT INTO events (run_id, sweep_id, from_state, to_state, attempt, lease_epoch,
                        worker_id, reason)
    SELECT e.run_id, e.sweep_id, e.from_state, 'SUCCEEDED', e.attempt, e.epoch, e.lease_owner,
           'succeeded' FROM ending e),
  -- Sweeps whose last unfinished run this batch ends (not locked: see EndSweepIfDone). This
  -- statement's snapshot still shows the runs it ends as live, hence "live runs other than
  -- those". A sweep's pending runs are looked for from its last ordinal down: the first ones
  -- were leased since the last vacuum, and their dead index entries are what a scan from the
  -- front walks over.
  swept AS (
    UPDATE sweeps s SET ended_at = now(), state = CASE WHEN s.state = 'CANCELLED' THEN
      'CANCELLED' WHEN EXISTS (SELECT 1 FROM runs WHERE sweep_id = s.sweep_id AND
      state = 'FAILED') THEN 'FAILED' ELSE 'SUCCEEDED' END
    WHERE s.sweep_id IN (SELECT e.sweep_id FROM ending e) AND s.ended_at IS NULL
      AND NOT EXISTS (SELECT 1 FROM (SELECT 1 FROM runs WHERE sweep_id = s.sweep_id
        AND state = 'PENDING' ORDER BY ordinal DESC LIMIT 1) last_pending)
      AND NOT EXISTS (SELECT 1 FROM runs l WHERE l.sweep_id = s.sweep_id
        AND l.state IN ('LEASED', 'RUNNING') AND l.run_id NOT IN (SELECT e.run_id FROM ending e)))
  SELECT q.i::integer,
         CASE WHEN d.i = q.i THEN 'completed' WHEN d.i IS NOT NULL THEN 'unchanged'
              WHEN cur.run_id IS NULL THEN 'not_found'
              WHEN cur.lease_epoch <> q.epoch THEN 'stale' ELSE 'unchanged' END,
         CASE WHEN d.i IS NOT NULL THEN d.ended WHEN cur.run_id IS NULL THEN NULL
              ELSE cur END
  FROM input q LEFT JOIN done d ON (d.ended).run_id = q.run_id
  LEFT JOIN runs cur ON cur.run_id = q.run_id;
END $$;
