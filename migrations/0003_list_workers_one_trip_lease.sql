-- 0003: ListWorkers, and leasing in one round trip. ListWorkers lists workers most recently
-- seen first with the keyset (last_seen_at, worker_id), each with the runs it holds (LEASED or
-- RUNNING by lease_owner).
CREATE INDEX workers_last_seen ON workers (last_seen_at DESC, worker_id DESC);
CREATE INDEX runs_live_by_owner ON runs (lease_owner) WHERE state IN ('LEASED', 'RUNNING');

-- Leasing in one round trip. The same two steps as before, in a function so the scheduler sends
-- one statement (no BEGIN/COMMIT, no statement per step): refresh the worker's last_seen_at
-- (SQLSTATE P0002 when it is not registered), rank the open sweeps with pending work (priority,
-- then fewest live runs, then oldest), and in that order take the first PENDING run in grid
-- order that fits the offer (FOR UPDATE SKIP LOCKED), giving it a new fencing token, a lease and
-- the granted devices, with a 'leased' event. Returns the leased row, or no row when none fits.
CREATE FUNCTION lease_next_run(p_worker uuid, p_cpu_threads integer, p_host_memory bigint,
                               p_gpu_memory bigint[], p_ttl_seconds double precision,
                               p_gpu_indices integer[], p_cpu_device integer)
RETURNS SETOF runs LANGUAGE plpgsql AS $$
DECLARE
  v_sweep uuid;
BEGIN
  UPDATE workers SET last_seen_at = now() WHERE worker_id = p_worker;
  IF NOT FOUND THEN
    RAISE EXCEPTION 'worker % is not registered', p_worker USING ERRCODE = 'P0002';
  END IF;
  FOR v_sweep IN
    SELECT s.sweep_id FROM sweeps s LEFT JOIN (SELECT sweep_id, count(*) AS n FROM runs
      WHERE state IN ('LEASED', 'RUNNING') GROUP BY sweep_id) live ON live.sweep_id = s.sweep_id
    WHERE s.ended_at IS NULL AND EXISTS (SELECT 1 FROM runs r WHERE r.sweep_id = s.sweep_id
      AND r.state = 'PENDING')
    ORDER BY s.priority DESC, coalesce(live.n, 0), s.created_at, s.sweep_id LIMIT 32
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
