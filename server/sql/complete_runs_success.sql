-- complete_runs_success: a batch of successful CompleteRun calls in one statement
-- (PostgresRunStore::CompleteRuns). Records the success of each p_runs[i] under lease
-- p_epochs[i]; the other arrays are the summary, NULL = not reported (p_final_eval_bpc: the
-- final BPC per evaluation set as a jsonb object, checked by the scheduler before it comes here;
-- p_dataset_digest: the dataset trained on; p_peak_device_memory and p_estimated_device_memory:
-- the device's high-water mark and the planner's estimate, bytes). Checked per run under its
-- row lock (locked in run_id order, so two batches cannot deadlock), without aborting the
-- batch: one row per request with outcome
--   'completed'  this call ended the run (SUCCEEDED, one event). Also when the reaper had
--                requeued the run (PENDING) and no one leased it since (the epoch still
--                matches): the work is done and checked against the plan, so it is recorded
--                rather than trained again (the holder was slow to report, not dead);
--   'unchanged'  the epoch matches but the run has ended (already completed by this lease,
--                cancelled, or failed by the reaper): the run as it is;
--   'invalid'    the summary disagrees with the run's plan (reason says how, as
--                core::SummaryMismatch words it): nothing is written, the run stays leased for
--                the scheduler to fail as INVALID_RESULT. The plan: steps and tokens equal to
--                the planned ones (where planned), finite BPCs, counted FLOPs per token within
--                1% of M (0 allowed for an attempt that resumed from the final checkpoint);
--   'stale'      another lease holds the run (the run shows the current epoch);
--   'not_found'  no such run (run is NULL).
-- A sweep whose last unfinished run this batch ends is ended in the same statement (SUCCEEDED,
-- FAILED when a run failed, or left CANCELLED); the sweep row is not locked, and the rare sweep
-- whose last two runs end at once in two batches is ended by the reaper's finalize_sweeps.
-- Planned once per connection (force_generic_plan), as lease_runs.
-- Failed completions do not come here: their retry policy lives in the scheduler.
CREATE OR REPLACE FUNCTION complete_runs_success(p_runs uuid[], p_epochs bigint[],
                                                 p_train_bpc double precision[],
                                                 p_val_bpc double precision[],
                                                 p_tokens bigint[], p_steps bigint[],
                                                 p_measured_m double precision[],
                                                 p_wall_seconds double precision[],
                                                 p_peak_memory bigint[],
                                                 p_tokens_per_second double precision[],
                                                 p_checkpoint_step bigint[],
                                                 p_checkpoint_uri text[],
                                                 p_final_eval_bpc jsonb[],
                                                 p_dataset_digest text[],
                                                 p_peak_device_memory bigint[],
                                                 p_estimated_device_memory bigint[])
RETURNS TABLE (request integer, outcome text, reason text, run runs) LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan AS $$
BEGIN
  -- Every writer of a run locks its row first; in run_id order, so two batches cannot deadlock.
  PERFORM 1 FROM runs WHERE run_id = ANY (p_runs) ORDER BY run_id FOR UPDATE;
  RETURN QUERY
  WITH input AS (
    SELECT * FROM unnest(p_runs, p_epochs, p_train_bpc, p_val_bpc, p_tokens, p_steps,
                         p_measured_m, p_wall_seconds, p_peak_memory, p_tokens_per_second,
                         p_checkpoint_step, p_checkpoint_uri, p_final_eval_bpc,
                         p_dataset_digest, p_peak_device_memory, p_estimated_device_memory)
      WITH ORDINALITY AS q(run_id, epoch, train_bpc, val_bpc, tokens, steps, measured_m,
                           wall_seconds, peak_memory, tokens_per_second, checkpoint_step,
                           checkpoint_uri, final_eval_bpc, dataset_digest, peak_device_memory,
                           estimated_device_memory, i)),
  planned AS (
    SELECT DISTINCT ON (q.run_id) q.*, r.state AS from_state, r.sweep_id, r.attempt,
           r.lease_owner, r.tokens AS planned_tokens, r.flops_per_token AS planned_m,
           coalesce((r.spec_json->'training'->>'steps')::bigint, 0) AS planned_steps,
           coalesce(r.checkpoint_step, 0) AS resumed_from
    FROM input q JOIN runs r ON r.run_id = q.run_id AND r.lease_epoch = q.epoch
    WHERE r.state IN ('LEASED', 'RUNNING', 'PENDING') ORDER BY q.run_id, q.i),
  checked AS (
    SELECT p.*, concat_ws('; ',
      CASE WHEN p.planned_steps > 0 AND p.steps IS DISTINCT FROM p.planned_steps THEN
        format('steps %s, planned %s', coalesce(p.steps, 0), p.planned_steps) END,
      CASE WHEN p.planned_tokens > 0 AND p.tokens IS DISTINCT FROM p.planned_tokens THEN
        format('tokens %s, planned %s', coalesce(p.tokens, 0), p.planned_tokens) END,
      -- NaN sorts above Infinity in PostgreSQL, so both fail "< 'Infinity'".
      CASE WHEN NOT coalesce(p.train_bpc > '-Infinity' AND p.train_bpc < 'Infinity'
                             AND p.val_bpc > '-Infinity' AND p.val_bpc < 'Infinity', false) THEN
        format('final BPC train %s, validation %s', p.train_bpc, p.val_bpc) END,
      CASE WHEN p.planned_m > 0
                AND NOT (p.planned_steps > 0 AND p.resumed_from >= p.planned_steps
                         AND p.measured_m = 0)
                AND NOT coalesce(abs(p.measured_m / p.planned_m - 1) <= 0.01, false) THEN
        format('counted %s FLOPs per token, planned M %s (more than 1%% apart)',
               p.measured_m, p.planned_m) END) AS why
    FROM planned p),
  ending AS (SELECT * FROM checked c WHERE c.why = ''),
  done AS (
    UPDATE runs r SET state = 'SUCCEEDED', final_train_bpc = e.train_bpc,
      final_val_bpc = e.val_bpc, summary_tokens = e.tokens, summary_steps = e.steps,
      measured_flops_per_token = e.measured_m, wall_seconds = e.wall_seconds,
      peak_memory_bytes = e.peak_memory, tokens_per_second = e.tokens_per_second,
      final_eval_bpc = e.final_eval_bpc, dataset_digest = e.dataset_digest,
      peak_device_memory_bytes = e.peak_device_memory,
      estimated_device_memory_bytes = e.estimated_device_memory,
      checkpoint_step = coalesce(e.checkpoint_step, r.checkpoint_step),
      checkpoint_uri = coalesce(e.checkpoint_uri, r.checkpoint_uri),
      latest_step = greatest(r.latest_step, coalesce(e.steps, 0)), lease_owner = NULL,
      lease_expires_at = NULL, lease_request_id = NULL, cancel_requested = false,
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
        AND state = 'PENDING' AND run_id NOT IN (SELECT e.run_id FROM ending e)
        ORDER BY ordinal DESC LIMIT 1) last_pending)
      AND NOT EXISTS (SELECT 1 FROM runs l WHERE l.sweep_id = s.sweep_id
        AND l.state IN ('LEASED', 'RUNNING') AND l.run_id NOT IN (SELECT e.run_id FROM ending e)))
  SELECT q.i::integer,
         CASE WHEN d.i = q.i THEN 'completed' WHEN d.i IS NOT NULL THEN 'unchanged'
              WHEN bad.run_id IS NOT NULL THEN 'invalid'
              WHEN cur.run_id IS NULL THEN 'not_found'
              WHEN cur.lease_epoch <> q.epoch THEN 'stale' ELSE 'unchanged' END,
         CASE WHEN d.i IS NULL THEN bad.why END,
         CASE WHEN d.i IS NOT NULL THEN d.ended WHEN cur.run_id IS NULL THEN NULL
              ELSE cur END
  FROM input q LEFT JOIN done d ON (d.ended).run_id = q.run_id
  LEFT JOIN checked bad ON bad.run_id = q.run_id AND bad.why <> ''
  LEFT JOIN runs cur ON cur.run_id = q.run_id;
END $$;
