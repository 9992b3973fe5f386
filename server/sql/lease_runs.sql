-- lease_runs: a batch of LeaseRun calls in one statement (PostgresRunStore::LeaseNextRuns, for
-- requests that offer the same resources: the scheduler groups them). p_workers[i] asks,
-- p_cpu_devices[i] is its CPU device index and p_gpu_indices[i] (an integer[] literal) its GPU
-- indices in the order of p_gpu_memory (free GPU memory, largest first; unknown = max).
-- Returns one row per leased request (request = i) and one with a NULL run per unregistered
-- worker; requests with no row found no work.
--
-- Each registered worker's last_seen_at is refreshed (at most once a second). Fair share
-- exactly as leasing one run at a time: the open sweeps with a fitting pending run are ranked
-- (priority desc, fewest live runs, oldest), and the j-th run a sweep gets in this batch ranks
-- as if the sweep had j-1 more live runs, so the batch takes the first runs of the order
-- (priority desc, live + j, created, id): a sweep's share is decided from counts alone, then
-- only that many of its runs are read and locked, in grid order, FOR UPDATE SKIP LOCKED. A run
-- held by a concurrent batch is skipped (the sweep's next taken instead); a sweep that cannot
-- fill its share drops out and the requests left are shared again among the others (eight
-- rounds at most). Each leased run gets lease_epoch + 1 (the fencing token), a lease of
-- p_ttl_seconds, its devices, its request's p_request_ids[i] (NULL = none: what a retry of that
-- request finds it by, statements/run_queue.sql renew_retried_lease) and a 'leased' event.
--
-- Index paths, and why:
-- - Fair share counts each open sweep's live runs with an index scan on runs_live_by_sweep, with
--   bitmap scans off: bitmap scans never mark dead index entries, so every lease re-read the
--   heap page of every run leased since the last vacuum (5.8 of 7.6 ms per lease after 6,000
--   leases, growing without bound); plain and index-only scans mark them.
-- - Whether a sweep has a fitting run at all is asked from its last ordinal down: the first runs
--   were leased since the last vacuum, and their dead entries are what a scan from the front
--   walks over.
-- - A sweep's share is taken in ordinal::bigint order, which only runs_pending_queue (an index of
--   pending runs) serves: with runs_pending_by_sweep, statistics that still say every run is
--   pending (a fresh install) could make the cached plan walk the sweep's finished runs one heap
--   row at a time (4.3 ms of a 4.5 ms batch 300 runs into a sweep).
-- - Planned once per connection (force_generic_plan): planning anew on every call cost more than
--   running it (+40% batches/s once planned once, batches of 16).
-- The rows of unregistered workers are asked for only when there are some (a worker registers
-- once and leases thousands of times).
-- A run pinned to a dataset digest (runs.dataset_pin, migration 0024) goes only to a worker that
-- holds that copy (workers.datasets, as it verified them at start): the batch takes pinned runs
-- whose digest every worker of the batch holds, so a fleet with two copies never hands a run to
-- the wrong one (which would fail it as DATA_MISMATCH, never retried); such runs wait for a batch
-- of the right workers instead.
CREATE OR REPLACE FUNCTION lease_runs(p_workers uuid[], p_cpu_devices integer[],
                                      p_gpu_indices text[], p_cpu_threads integer,
                                      p_host_memory bigint, p_gpu_memory bigint[],
                                      p_ttl_seconds double precision, p_request_ids text[])
RETURNS TABLE (request integer, run runs) LANGUAGE plpgsql
SET enable_bitmapscan = off SET plan_cache_mode = force_generic_plan AS $$
DECLARE
  v_waiting integer[];  -- requests of registered workers still without a run, in order
  v_runs uuid[];        -- the runs a round takes, in fair-share order
  v_leased integer;
  v_round integer := 0;
  v_short uuid[] := '{}';  -- sweeps that had fewer fitting runs free than their share
  v_short_now uuid[];
  v_held text[];  -- the dataset digests every registered worker of the batch holds
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
  SELECT coalesce(array_agg(h.digest), '{}') INTO v_held FROM (
    SELECT d->>'digest' AS digest FROM workers w CROSS JOIN jsonb_array_elements(w.datasets) d
    WHERE w.worker_id = ANY (p_workers) GROUP BY 1
    HAVING count(DISTINCT w.worker_id) =
      (SELECT count(*) FROM workers x WHERE x.worker_id = ANY (p_workers))) h;
  WHILE cardinality(v_waiting) > 0 AND v_round < 8 LOOP
    v_round := v_round + 1;
    WITH open AS (
      SELECT s.sweep_id, s.priority, s.created_at, live.n FROM sweeps s CROSS JOIN LATERAL (
        SELECT count(*) AS n FROM runs l WHERE l.sweep_id = s.sweep_id
          AND l.state IN ('LEASED', 'RUNNING')) live
      WHERE s.ended_at IS NULL AND s.sweep_id <> ALL (v_short) AND EXISTS (
        SELECT 1 FROM (SELECT 1 FROM runs r WHERE r.sweep_id = s.sweep_id
          AND r.state = 'PENDING' AND r.not_before <= now() AND r.ranks = 1
          AND (r.dataset_pin IS NULL OR r.dataset_pin = ANY (v_held))
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
        WHERE r.sweep_id = o.sweep_id AND r.state = 'PENDING' AND r.not_before <= now() AND r.ranks = 1
          AND (r.dataset_pin IS NULL OR r.dataset_pin = ANY (v_held))
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
        lease_request_id = p_request_ids[v_waiting[array_position(v_runs, r.run_id)]],
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
