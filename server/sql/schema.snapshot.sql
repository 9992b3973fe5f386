CREATE FUNCTION public.append_metric_arrays(p_run uuid, p_epoch bigint, p_increasing boolean, p_step bigint[], p_attempt integer[], p_tokens bigint[], p_unique_tokens bigint[], p_epochs double precision[], p_train_bpc double precision[], p_val_bpc double precision[], p_learning_rate double precision[], p_grad_norm double precision[], p_aux_loss double precision[], p_z_loss double precision[], p_tokens_per_second double precision[], p_flops_per_second double precision[], p_flops double precision[], p_expert_load jsonb[], p_eval_bpc jsonb[], p_logged_us bigint[]) RETURNS integer
    LANGUAGE plpgsql
    AS $$
DECLARE
  v_epoch bigint;
  v_state text;
  v_highest bigint;
  v_stored integer;
BEGIN
  SELECT lease_epoch, state INTO v_epoch, v_state FROM runs WHERE run_id = p_run FOR UPDATE;
  IF NOT FOUND THEN
    RAISE EXCEPTION 'run % not found', p_run USING ERRCODE = 'P0002';
  END IF;
  IF v_epoch <> p_epoch THEN
    RAISE EXCEPTION USING ERRCODE = 'PR002', MESSAGE = v_epoch::text;
  END IF;
  IF v_state = 'PENDING' THEN
    RAISE EXCEPTION USING ERRCODE = 'PR001', MESSAGE = 'the lease was lost (run is PENDING)';
  END IF;
  IF v_state IN ('SUCCEEDED', 'FAILED', 'CANCELLED') THEN
    RAISE EXCEPTION USING ERRCODE = 'PR001',
      MESSAGE = format('the run has ended (%s) and takes no more points', v_state);
  END IF;
  IF cardinality(p_step) = 0 THEN
    RETURN 0;
  END IF;
  SELECT max(step) INTO v_highest FROM metrics WHERE run_id = p_run;
  IF p_increasing AND p_step[1] > coalesce(v_highest, -1) THEN
    INSERT INTO metrics (run_id, step, attempt, tokens, unique_tokens, epoch, train_bpc, val_bpc,
                         learning_rate, grad_norm, aux_loss, z_loss, tokens_per_second,
                         flops_per_second, flops, expert_load, eval_bpc, logged_at,
                         lease_epoch)
    SELECT p_run, step, attempt, tokens, unique_tokens, epoch, train_bpc, val_bpc, learning_rate,
           grad_norm, aux_loss, z_loss, tokens_per_second, flops_per_second, flops, expert_load,
           eval_bpc, to_timestamp(us / 1000000.0), p_epoch
    FROM unnest(p_step, p_attempt, p_tokens, p_unique_tokens, p_epochs, p_train_bpc, p_val_bpc,
                p_learning_rate, p_grad_norm, p_aux_loss, p_z_loss, p_tokens_per_second,
                p_flops_per_second, p_flops, p_expert_load, p_eval_bpc, p_logged_us)
      AS x(step, attempt, tokens, unique_tokens, epoch, train_bpc, val_bpc, learning_rate,
           grad_norm, aux_loss, z_loss, tokens_per_second, flops_per_second, flops, expert_load,
           eval_bpc, us);
    GET DIAGNOSTICS v_stored = ROW_COUNT;
  ELSE
    INSERT INTO metrics (run_id, step, attempt, tokens, unique_tokens, epoch, train_bpc, val_bpc,
                         learning_rate, grad_norm, aux_loss, z_loss, tokens_per_second,
                         flops_per_second, flops, expert_load, eval_bpc, logged_at,
                         lease_epoch)
    SELECT p_run, step, attempt, tokens, unique_tokens, epoch, train_bpc, val_bpc, learning_rate,
           grad_norm, aux_loss, z_loss, tokens_per_second, flops_per_second, flops, expert_load,
           eval_bpc, to_timestamp(us / 1000000.0), p_epoch
    FROM unnest(p_step, p_attempt, p_tokens, p_unique_tokens, p_epochs, p_train_bpc, p_val_bpc,
                p_learning_rate, p_grad_norm, p_aux_loss, p_z_loss, p_tokens_per_second,
                p_flops_per_second, p_flops, p_expert_load, p_eval_bpc, p_logged_us)
      AS x(step, attempt, tokens, unique_tokens, epoch, train_bpc, val_bpc, learning_rate,
           grad_norm, aux_loss, z_loss, tokens_per_second, flops_per_second, flops, expert_load,
           eval_bpc, us)
    ON CONFLICT (run_id, step) DO UPDATE SET attempt = EXCLUDED.attempt,
      tokens = EXCLUDED.tokens, unique_tokens = EXCLUDED.unique_tokens, epoch = EXCLUDED.epoch,
      train_bpc = EXCLUDED.train_bpc, val_bpc = EXCLUDED.val_bpc,
      learning_rate = EXCLUDED.learning_rate, grad_norm = EXCLUDED.grad_norm,
      aux_loss = EXCLUDED.aux_loss, z_loss = EXCLUDED.z_loss,
      tokens_per_second = EXCLUDED.tokens_per_second,
      flops_per_second = EXCLUDED.flops_per_second, flops = EXCLUDED.flops,
      expert_load = EXCLUDED.expert_load, eval_bpc = EXCLUDED.eval_bpc, logged_at = EXCLUDED.logged_at,
      received_at = now(), lease_epoch = EXCLUDED.lease_epoch
    WHERE metrics.lease_epoch < EXCLUDED.lease_epoch;
    GET DIAGNOSTICS v_stored = ROW_COUNT;
  END IF;
  -- The run's progress follows the points of this batch, the latest lease's (only stored points
  -- count: a batch that stored nothing was a resend of points already counted).
  IF v_stored > 0 THEN
    UPDATE runs SET latest_step = (SELECT max(s) FROM unnest(p_step) s),
      latest_val_bpc = coalesce((SELECT v FROM unnest(p_step, p_val_bpc) AS b(s, v)
                                 WHERE v IS NOT NULL ORDER BY s DESC LIMIT 1), latest_val_bpc)
    WHERE run_id = p_run;
  END IF;
  RETURN v_stored;
END $$;

CREATE FUNCTION public.apply_telemetry_retention(p_metrics_age double precision, p_points integer, p_events_age double precision, p_workers_age double precision, p_sweeps integer) RETURNS TABLE(sweeps_thinned integer, points_deleted bigint, sweeps_pruned integer, events_deleted bigint, workers_deleted integer)
    LANGUAGE plpgsql
    AS $$
DECLARE
  v_thin uuid[];
  v_prune uuid[];
BEGIN
  sweeps_thinned := 0; points_deleted := 0; sweeps_pruned := 0; events_deleted := 0;
  v_thin := ARRAY(SELECT s.sweep_id FROM sweeps s
                  WHERE s.ended_at < now() - make_interval(secs => p_metrics_age)
                    AND s.metrics_thinned_at IS NULL
                  ORDER BY s.ended_at LIMIT p_sweeps FOR UPDATE SKIP LOCKED);
  IF cardinality(v_thin) > 0 THEN
    WITH ranked AS (
      SELECT m.run_id, m.step, m.val_bpc,
             row_number() OVER (PARTITION BY m.run_id ORDER BY m.step) AS rn,
             count(*) OVER (PARTITION BY m.run_id) AS n
      FROM metrics m WHERE m.run_id IN (SELECT r.run_id FROM runs r WHERE r.sweep_id = ANY (v_thin))),
    gone AS (
      DELETE FROM metrics m USING ranked k
      WHERE m.run_id = k.run_id AND m.step = k.step AND k.n > p_points AND k.val_bpc IS NULL
        AND k.rn <> k.n AND (k.rn - 1) % ceil(k.n::double precision / p_points)::bigint <> 0
      RETURNING 1)
    SELECT count(*) INTO points_deleted FROM gone;
    UPDATE sweeps SET metrics_thinned_at = now() WHERE sweep_id = ANY (v_thin);
    sweeps_thinned := cardinality(v_thin);
  END IF;

  v_prune := ARRAY(SELECT s.sweep_id FROM sweeps s
                   WHERE s.ended_at < now() - make_interval(secs => p_events_age)
                     AND s.events_pruned_at IS NULL
                   ORDER BY s.ended_at LIMIT p_sweeps FOR UPDATE SKIP LOCKED);
  IF cardinality(v_prune) > 0 THEN
    WITH last_event AS (
      SELECT e.run_id, max(e.event_id) AS event_id FROM events e
      WHERE e.sweep_id = ANY (v_prune) GROUP BY e.run_id),
    gone AS (
      DELETE FROM events e USING last_event l
      WHERE e.sweep_id = ANY (v_prune) AND e.run_id = l.run_id AND e.event_id <> l.event_id
      RETURNING 1)
    SELECT count(*) INTO events_deleted FROM gone;
    UPDATE sweeps SET events_pruned_at = now() WHERE sweep_id = ANY (v_prune);
    sweeps_pruned := cardinality(v_prune);
  END IF;

  DELETE FROM workers w
  WHERE w.last_seen_at < now() - make_interval(secs => p_workers_age)
    AND NOT EXISTS (SELECT 1 FROM runs r WHERE r.lease_owner = w.worker_id
                      AND r.state IN ('LEASED', 'RUNNING'));
  GET DIAGNOSTICS workers_deleted = ROW_COUNT;
  RETURN NEXT;
END $$;

CREATE TABLE public.runs (
    run_id uuid NOT NULL,
    sweep_id uuid NOT NULL,
    ordinal integer NOT NULL,
    name text NOT NULL,
    spec_json jsonb NOT NULL,
    spec_bytes bytea NOT NULL,
    role text NOT NULL,
    layout text NOT NULL,
    params bigint NOT NULL,
    active_params bigint NOT NULL,
    activation_rate double precision NOT NULL,
    flops_per_token double precision NOT NULL,
    compute_flops double precision NOT NULL,
    tokens bigint NOT NULL,
    unique_tokens bigint NOT NULL,
    epochs double precision NOT NULL,
    d_model integer NOT NULL,
    num_layers integer NOT NULL,
    num_experts integer NOT NULL,
    top_k integer NOT NULL,
    expert_hidden integer NOT NULL,
    compute_budget text NOT NULL,
    compute_multiple double precision NOT NULL,
    data_variant text NOT NULL,
    seed bigint NOT NULL,
    predicted_efficiency_leverage double precision DEFAULT 0 NOT NULL,
    cpu_threads integer DEFAULT 1 NOT NULL,
    gpus integer DEFAULT 0 NOT NULL,
    memory_bytes bigint DEFAULT 0 NOT NULL,
    gpu_memory_bytes bigint DEFAULT 0 NOT NULL,
    state text DEFAULT 'PENDING'::text NOT NULL,
    priority integer DEFAULT 0 NOT NULL,
    attempt integer DEFAULT 1 NOT NULL,
    max_attempts integer DEFAULT 3 NOT NULL,
    not_before timestamp with time zone DEFAULT '-infinity'::timestamp with time zone NOT NULL,
    lease_owner uuid,
    lease_epoch bigint DEFAULT 0 NOT NULL,
    lease_expires_at timestamp with time zone,
    device_indices integer[] DEFAULT '{}'::integer[] NOT NULL,
    cancel_requested boolean DEFAULT false NOT NULL,
    checkpoint_step bigint,
    checkpoint_uri text,
    checkpoint_at timestamp with time zone,
    failure_class text,
    failure_code integer,
    failure_message text,
    final_train_bpc double precision,
    final_val_bpc double precision,
    summary_tokens bigint,
    summary_steps bigint,
    measured_flops_per_token double precision,
    wall_seconds double precision,
    peak_memory_bytes bigint,
    tokens_per_second double precision,
    latest_step bigint DEFAULT 0 NOT NULL,
    latest_val_bpc double precision,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    started_at timestamp with time zone,
    ended_at timestamp with time zone,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    preemptions integer DEFAULT 0 NOT NULL,
    final_eval_bpc jsonb,
    dataset_digest text,
    lease_request_id text,
    ranks integer DEFAULT 1 NOT NULL,
    peak_device_memory_bytes bigint,
    estimated_device_memory_bytes bigint,
    dataset_pin text,
    CONSTRAINT runs_failure_class_check CHECK ((failure_class = ANY (ARRAY['PREEMPTED'::text, 'INFRASTRUCTURE'::text, 'OUT_OF_MEMORY'::text, 'USER_ERROR'::text, 'LEASE_EXPIRED'::text, 'DIVERGED'::text, 'HUNG'::text, 'INVALID_RESULT'::text, 'DATA_MISMATCH'::text]))),
    CONSTRAINT runs_state_check CHECK ((state = ANY (ARRAY['PENDING'::text, 'LEASED'::text, 'RUNNING'::text, 'SUCCEEDED'::text, 'FAILED'::text, 'CANCELLED'::text])))
)
WITH (autovacuum_vacuum_scale_factor='0.0', autovacuum_vacuum_threshold='500', autovacuum_analyze_scale_factor='0.05', autovacuum_vacuum_cost_delay='0');

CREATE FUNCTION public.complete_runs_success(p_runs uuid[], p_epochs bigint[], p_train_bpc double precision[], p_val_bpc double precision[], p_tokens bigint[], p_steps bigint[], p_measured_m double precision[], p_wall_seconds double precision[], p_peak_memory bigint[], p_tokens_per_second double precision[], p_checkpoint_step bigint[], p_checkpoint_uri text[], p_final_eval_bpc jsonb[], p_dataset_digest text[], p_peak_device_memory bigint[], p_estimated_device_memory bigint[]) RETURNS TABLE(request integer, outcome text, reason text, run public.runs)
    LANGUAGE plpgsql
    SET plan_cache_mode TO 'force_generic_plan'
    AS $$
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

CREATE FUNCTION public.delete_records_of_deleted_runs() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
DECLARE
  v_runs uuid[] := ARRAY(SELECT run_id FROM deleted_runs);
BEGIN
  DELETE FROM events WHERE run_id = ANY (v_runs);
  DELETE FROM metrics WHERE run_id = ANY (v_runs);
  RETURN NULL;
END $$;

CREATE FUNCTION public.leader_fence_holds(p_name text, p_epoch bigint) RETURNS boolean
    LANGUAGE plpgsql
    AS $$
BEGIN
  PERFORM 1 FROM leader_leases
  WHERE name = p_name AND epoch = p_epoch AND leader_id <> '' AND expires_at > clock_timestamp()
  FOR SHARE;
  RETURN FOUND;
END $$;

CREATE FUNCTION public.leader_lease_acquire(p_name text, p_leader text, p_ttl double precision) RETURNS TABLE(holder text, term bigint, expires timestamp with time zone, remaining double precision)
    LANGUAGE plpgsql
    AS $$
BEGIN
  INSERT INTO leader_leases AS l (name, leader_id, epoch, elected_at, expires_at)
  VALUES (p_name, p_leader, 1, now(), now() + make_interval(secs => p_ttl))
  ON CONFLICT (name) DO UPDATE
    SET epoch = CASE WHEN l.leader_id = p_leader AND l.expires_at > now() THEN l.epoch
                     ELSE l.epoch + 1 END,
        elected_at = CASE WHEN l.leader_id = p_leader AND l.expires_at > now() THEN l.elected_at
                          ELSE now() END,
        leader_id = p_leader,
        expires_at = now() + make_interval(secs => p_ttl)
    WHERE l.expires_at <= now() OR l.leader_id = p_leader;
  RETURN QUERY
    SELECT CASE WHEN l.expires_at > now() THEN l.leader_id ELSE '' END, l.epoch, l.expires_at,
           greatest(extract(epoch FROM l.expires_at - now()), 0)::double precision
    FROM leader_leases l WHERE l.name = p_name;
END $$;

CREATE FUNCTION public.leader_lease_resign(p_name text, p_leader text, p_epoch bigint) RETURNS boolean
    LANGUAGE plpgsql
    AS $$
BEGIN
  UPDATE leader_leases SET leader_id = '', expires_at = now()
  WHERE name = p_name AND leader_id = p_leader AND epoch = p_epoch AND expires_at > now();
  IF NOT FOUND THEN
    RETURN false;
  END IF;
  PERFORM pg_notify('parity_leadership', p_name);
  RETURN true;
END $$;

CREATE FUNCTION public.lease_runs(p_workers uuid[], p_cpu_devices integer[], p_gpu_indices text[], p_cpu_threads integer, p_host_memory bigint, p_gpu_memory bigint[], p_ttl_seconds double precision, p_request_ids text[]) RETURNS TABLE(request integer, run public.runs)
    LANGUAGE plpgsql
    SET enable_bitmapscan TO 'off'
    SET plan_cache_mode TO 'force_generic_plan'
    AS $$
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

CREATE FUNCTION public.notify_run_pending() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
  PERFORM pg_notify('parity_runs_pending', '');
  RETURN NULL;
END $$;

CREATE FUNCTION public.notify_runs_pending() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
  IF EXISTS (SELECT 1 FROM changed_runs WHERE state = 'PENDING') THEN
    PERFORM pg_notify('parity_runs_pending', '');
  END IF;
  RETURN NULL;
END $$;

CREATE FUNCTION public.record_reaper_pass(p_outage boolean, p_max_silence_s double precision, p_lease_ttl_s double precision, p_grace_s double precision) RETURNS TABLE(outage boolean, up_since timestamp with time zone, charge_from timestamp with time zone, reap_from timestamp with time zone)
    LANGUAGE plpgsql
    AS $$
DECLARE
  v_last timestamptz;
  v_outage boolean;
BEGIN
  SELECT l.last_pass_at INTO v_last FROM reaper_liveness l WHERE l.singleton FOR UPDATE;
  v_outage := p_outage OR (v_last IS NOT NULL
                           AND now() - v_last > make_interval(secs => p_max_silence_s));
  INSERT INTO reaper_liveness AS l (singleton, last_pass_at, up_since, charge_from, reap_from)
  VALUES (true, now(), '-infinity', '-infinity', '-infinity')
  ON CONFLICT (singleton) DO UPDATE SET last_pass_at = now();
  IF v_outage THEN
    UPDATE reaper_liveness l SET
      up_since = now(),
      charge_from = greatest(l.charge_from, now() + make_interval(secs => p_lease_ttl_s)),
      reap_from = greatest(l.reap_from, now() + make_interval(secs => p_grace_s))
    WHERE l.singleton;
  END IF;
  RETURN QUERY SELECT v_outage, l.up_since, l.charge_from, l.reap_from
    FROM reaper_liveness l WHERE l.singleton;
END;
$$;

CREATE TABLE public.access_tokens (
    token_id uuid DEFAULT gen_random_uuid() NOT NULL,
    name text NOT NULL,
    role text NOT NULL,
    secret_sha256 bytea NOT NULL,
    created_by text NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    expires_at timestamp with time zone,
    revoked_at timestamp with time zone,
    CONSTRAINT access_tokens_name_check CHECK ((name ~ '^[A-Za-z0-9._@-]{1,64}$'::text)),
    CONSTRAINT access_tokens_role_check CHECK ((role = ANY (ARRAY['viewer'::text, 'researcher'::text, 'worker'::text, 'admin'::text]))),
    CONSTRAINT access_tokens_secret_sha256_check CHECK ((length(secret_sha256) = 32))
);

CREATE TABLE public.events (
    event_id bigint NOT NULL,
    run_id uuid NOT NULL,
    sweep_id uuid NOT NULL,
    from_state text,
    to_state text NOT NULL,
    attempt integer NOT NULL,
    lease_epoch bigint DEFAULT 0 NOT NULL,
    worker_id uuid,
    reason text DEFAULT ''::text NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    xid xid8 DEFAULT pg_current_xact_id() NOT NULL
);

CREATE SEQUENCE public.events_event_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;

ALTER SEQUENCE public.events_event_id_seq OWNED BY public.events.event_id;

CREATE TABLE public.gang_rendezvous (
    run_id uuid NOT NULL,
    lease_epoch bigint NOT NULL,
    world_size integer NOT NULL,
    address text,
    placed_at timestamp with time zone NOT NULL,
    deadline timestamp with time zone NOT NULL,
    released_at timestamp with time zone
);

CREATE TABLE public.gang_slots (
    run_id uuid NOT NULL,
    rank integer NOT NULL,
    lease_epoch bigint NOT NULL,
    worker_id uuid NOT NULL,
    device_indices integer[] NOT NULL,
    delivered boolean DEFAULT false NOT NULL,
    checked_in_at timestamp with time zone,
    expires_at timestamp with time zone NOT NULL,
    delivered_request_id text
);

CREATE TABLE public.gang_waiting_workers (
    worker_id uuid NOT NULL,
    cpu_threads integer NOT NULL,
    host_memory_bytes bigint NOT NULL,
    cpu_device integer NOT NULL,
    gpu_indices integer[] NOT NULL,
    gpu_memory_bytes bigint[] NOT NULL,
    waiting_until timestamp with time zone NOT NULL
);

CREATE TABLE public.leader_leases (
    name text NOT NULL,
    leader_id text NOT NULL,
    epoch bigint NOT NULL,
    elected_at timestamp with time zone NOT NULL,
    expires_at timestamp with time zone NOT NULL,
    CONSTRAINT leader_leases_epoch_check CHECK ((epoch > 0))
);

CREATE TABLE public.metrics (
    run_id uuid NOT NULL,
    step bigint NOT NULL,
    attempt integer NOT NULL,
    tokens bigint NOT NULL,
    unique_tokens bigint NOT NULL,
    epoch double precision NOT NULL,
    train_bpc double precision NOT NULL,
    val_bpc double precision,
    learning_rate double precision NOT NULL,
    grad_norm double precision NOT NULL,
    aux_loss double precision NOT NULL,
    z_loss double precision NOT NULL,
    tokens_per_second double precision NOT NULL,
    flops_per_second double precision NOT NULL,
    flops double precision NOT NULL,
    expert_load jsonb,
    logged_at timestamp with time zone,
    received_at timestamp with time zone DEFAULT now() NOT NULL,
    lease_epoch bigint DEFAULT 0 NOT NULL,
    eval_bpc jsonb
)
PARTITION BY HASH (run_id);

CREATE TABLE public.metrics_p00 (
    run_id uuid NOT NULL,
    step bigint NOT NULL,
    attempt integer NOT NULL,
    tokens bigint NOT NULL,
    unique_tokens bigint NOT NULL,
    epoch double precision NOT NULL,
    train_bpc double precision NOT NULL,
    val_bpc double precision,
    learning_rate double precision NOT NULL,
    grad_norm double precision NOT NULL,
    aux_loss double precision NOT NULL,
    z_loss double precision NOT NULL,
    tokens_per_second double precision NOT NULL,
    flops_per_second double precision NOT NULL,
    flops double precision NOT NULL,
    expert_load jsonb,
    logged_at timestamp with time zone,
    received_at timestamp with time zone DEFAULT now() NOT NULL,
    lease_epoch bigint DEFAULT 0 NOT NULL,
    eval_bpc jsonb
);

CREATE TABLE public.metrics_p01 (
    run_id uuid NOT NULL,
    step bigint NOT NULL,
    attempt integer NOT NULL,
    tokens bigint NOT NULL,
    unique_tokens bigint NOT NULL,
    epoch double precision NOT NULL,
    train_bpc double precision NOT NULL,
    val_bpc double precision,
    learning_rate double precision NOT NULL,
    grad_norm double precision NOT NULL,
    aux_loss double precision NOT NULL,
    z_loss double precision NOT NULL,
    tokens_per_second double precision NOT NULL,
    flops_per_second double precision NOT NULL,
    flops double precision NOT NULL,
    expert_load jsonb,
    logged_at timestamp with time zone,
    received_at timestamp with time zone DEFAULT now() NOT NULL,
    lease_epoch bigint DEFAULT 0 NOT NULL,
    eval_bpc jsonb
);

CREATE TABLE public.metrics_p02 (
    run_id uuid NOT NULL,
    step bigint NOT NULL,
    attempt integer NOT NULL,
    tokens bigint NOT NULL,
    unique_tokens bigint NOT NULL,
    epoch double precision NOT NULL,
    train_bpc double precision NOT NULL,
    val_bpc double precision,
    learning_rate double precision NOT NULL,
    grad_norm double precision NOT NULL,
    aux_loss double precision NOT NULL,
    z_loss double precision NOT NULL,
    tokens_per_second double precision NOT NULL,
    flops_per_second double precision NOT NULL,
    flops double precision NOT NULL,
    expert_load jsonb,
    logged_at timestamp with time zone,
    received_at timestamp with time zone DEFAULT now() NOT NULL,
    lease_epoch bigint DEFAULT 0 NOT NULL,
    eval_bpc jsonb
);

CREATE TABLE public.metrics_p03 (
    run_id uuid NOT NULL,
    step bigint NOT NULL,
    attempt integer NOT NULL,
    tokens bigint NOT NULL,
    unique_tokens bigint NOT NULL,
    epoch double precision NOT NULL,
    train_bpc double precision NOT NULL,
    val_bpc double precision,
    learning_rate double precision NOT NULL,
    grad_norm double precision NOT NULL,
    aux_loss double precision NOT NULL,
    z_loss double precision NOT NULL,
    tokens_per_second double precision NOT NULL,
    flops_per_second double precision NOT NULL,
    flops double precision NOT NULL,
    expert_load jsonb,
    logged_at timestamp with time zone,
    received_at timestamp with time zone DEFAULT now() NOT NULL,
    lease_epoch bigint DEFAULT 0 NOT NULL,
    eval_bpc jsonb
);

CREATE TABLE public.metrics_p04 (
    run_id uuid NOT NULL,
    step bigint NOT NULL,
    attempt integer NOT NULL,
    tokens bigint NOT NULL,
    unique_tokens bigint NOT NULL,
    epoch double precision NOT NULL,
    train_bpc double precision NOT NULL,
    val_bpc double precision,
    learning_rate double precision NOT NULL,
    grad_norm double precision NOT NULL,
    aux_loss double precision NOT NULL,
    z_loss double precision NOT NULL,
    tokens_per_second double precision NOT NULL,
    flops_per_second double precision NOT NULL,
    flops double precision NOT NULL,
    expert_load jsonb,
    logged_at timestamp with time zone,
    received_at timestamp with time zone DEFAULT now() NOT NULL,
    lease_epoch bigint DEFAULT 0 NOT NULL,
    eval_bpc jsonb
);

CREATE TABLE public.metrics_p05 (
    run_id uuid NOT NULL,
    step bigint NOT NULL,
    attempt integer NOT NULL,
    tokens bigint NOT NULL,
    unique_tokens bigint NOT NULL,
    epoch double precision NOT NULL,
    train_bpc double precision NOT NULL,
    val_bpc double precision,
    learning_rate double precision NOT NULL,
    grad_norm double precision NOT NULL,
    aux_loss double precision NOT NULL,
    z_loss double precision NOT NULL,
    tokens_per_second double precision NOT NULL,
    flops_per_second double precision NOT NULL,
    flops double precision NOT NULL,
    expert_load jsonb,
    logged_at timestamp with time zone,
    received_at timestamp with time zone DEFAULT now() NOT NULL,
    lease_epoch bigint DEFAULT 0 NOT NULL,
    eval_bpc jsonb
);

CREATE TABLE public.metrics_p06 (
    run_id uuid NOT NULL,
    step bigint NOT NULL,
    attempt integer NOT NULL,
    tokens bigint NOT NULL,
    unique_tokens bigint NOT NULL,
    epoch double precision NOT NULL,
    train_bpc double precision NOT NULL,
    val_bpc double precision,
    learning_rate double precision NOT NULL,
    grad_norm double precision NOT NULL,
    aux_loss double precision NOT NULL,
    z_loss double precision NOT NULL,
    tokens_per_second double precision NOT NULL,
    flops_per_second double precision NOT NULL,
    flops double precision NOT NULL,
    expert_load jsonb,
    logged_at timestamp with time zone,
    received_at timestamp with time zone DEFAULT now() NOT NULL,
    lease_epoch bigint DEFAULT 0 NOT NULL,
    eval_bpc jsonb
);

CREATE TABLE public.metrics_p07 (
    run_id uuid NOT NULL,
    step bigint NOT NULL,
    attempt integer NOT NULL,
    tokens bigint NOT NULL,
    unique_tokens bigint NOT NULL,
    epoch double precision NOT NULL,
    train_bpc double precision NOT NULL,
    val_bpc double precision,
    learning_rate double precision NOT NULL,
    grad_norm double precision NOT NULL,
    aux_loss double precision NOT NULL,
    z_loss double precision NOT NULL,
    tokens_per_second double precision NOT NULL,
    flops_per_second double precision NOT NULL,
    flops double precision NOT NULL,
    expert_load jsonb,
    logged_at timestamp with time zone,
    received_at timestamp with time zone DEFAULT now() NOT NULL,
    lease_epoch bigint DEFAULT 0 NOT NULL,
    eval_bpc jsonb
);

CREATE TABLE public.metrics_p08 (
    run_id uuid NOT NULL,
    step bigint NOT NULL,
    attempt integer NOT NULL,
    tokens bigint NOT NULL,
    unique_tokens bigint NOT NULL,
    epoch double precision NOT NULL,
    train_bpc double precision NOT NULL,
    val_bpc double precision,
    learning_rate double precision NOT NULL,
    grad_norm double precision NOT NULL,
    aux_loss double precision NOT NULL,
    z_loss double precision NOT NULL,
    tokens_per_second double precision NOT NULL,
    flops_per_second double precision NOT NULL,
    flops double precision NOT NULL,
    expert_load jsonb,
    logged_at timestamp with time zone,
    received_at timestamp with time zone DEFAULT now() NOT NULL,
    lease_epoch bigint DEFAULT 0 NOT NULL,
    eval_bpc jsonb
);

CREATE TABLE public.metrics_p09 (
    run_id uuid NOT NULL,
    step bigint NOT NULL,
    attempt integer NOT NULL,
    tokens bigint NOT NULL,
    unique_tokens bigint NOT NULL,
    epoch double precision NOT NULL,
    train_bpc double precision NOT NULL,
    val_bpc double precision,
    learning_rate double precision NOT NULL,
    grad_norm double precision NOT NULL,
    aux_loss double precision NOT NULL,
    z_loss double precision NOT NULL,
    tokens_per_second double precision NOT NULL,
    flops_per_second double precision NOT NULL,
    flops double precision NOT NULL,
    expert_load jsonb,
    logged_at timestamp with time zone,
    received_at timestamp with time zone DEFAULT now() NOT NULL,
    lease_epoch bigint DEFAULT 0 NOT NULL,
    eval_bpc jsonb
);

CREATE TABLE public.metrics_p10 (
    run_id uuid NOT NULL,
    step bigint NOT NULL,
    attempt integer NOT NULL,
    tokens bigint NOT NULL,
    unique_tokens bigint NOT NULL,
    epoch double precision NOT NULL,
    train_bpc double precision NOT NULL,
    val_bpc double precision,
    learning_rate double precision NOT NULL,
    grad_norm double precision NOT NULL,
    aux_loss double precision NOT NULL,
    z_loss double precision NOT NULL,
    tokens_per_second double precision NOT NULL,
    flops_per_second double precision NOT NULL,
    flops double precision NOT NULL,
    expert_load jsonb,
    logged_at timestamp with time zone,
    received_at timestamp with time zone DEFAULT now() NOT NULL,
    lease_epoch bigint DEFAULT 0 NOT NULL,
    eval_bpc jsonb
);

CREATE TABLE public.metrics_p11 (
    run_id uuid NOT NULL,
    step bigint NOT NULL,
    attempt integer NOT NULL,
    tokens bigint NOT NULL,
    unique_tokens bigint NOT NULL,
    epoch double precision NOT NULL,
    train_bpc double precision NOT NULL,
    val_bpc double precision,
    learning_rate double precision NOT NULL,
    grad_norm double precision NOT NULL,
    aux_loss double precision NOT NULL,
    z_loss double precision NOT NULL,
    tokens_per_second double precision NOT NULL,
    flops_per_second double precision NOT NULL,
    flops double precision NOT NULL,
    expert_load jsonb,
    logged_at timestamp with time zone,
    received_at timestamp with time zone DEFAULT now() NOT NULL,
    lease_epoch bigint DEFAULT 0 NOT NULL,
    eval_bpc jsonb
);

CREATE TABLE public.metrics_p12 (
    run_id uuid NOT NULL,
    step bigint NOT NULL,
    attempt integer NOT NULL,
    tokens bigint NOT NULL,
    unique_tokens bigint NOT NULL,
    epoch double precision NOT NULL,
    train_bpc double precision NOT NULL,
    val_bpc double precision,
    learning_rate double precision NOT NULL,
    grad_norm double precision NOT NULL,
    aux_loss double precision NOT NULL,
    z_loss double precision NOT NULL,
    tokens_per_second double precision NOT NULL,
    flops_per_second double precision NOT NULL,
    flops double precision NOT NULL,
    expert_load jsonb,
    logged_at timestamp with time zone,
    received_at timestamp with time zone DEFAULT now() NOT NULL,
    lease_epoch bigint DEFAULT 0 NOT NULL,
    eval_bpc jsonb
);

CREATE TABLE public.metrics_p13 (
    run_id uuid NOT NULL,
    step bigint NOT NULL,
    attempt integer NOT NULL,
    tokens bigint NOT NULL,
    unique_tokens bigint NOT NULL,
    epoch double precision NOT NULL,
    train_bpc double precision NOT NULL,
    val_bpc double precision,
    learning_rate double precision NOT NULL,
    grad_norm double precision NOT NULL,
    aux_loss double precision NOT NULL,
    z_loss double precision NOT NULL,
    tokens_per_second double precision NOT NULL,
    flops_per_second double precision NOT NULL,
    flops double precision NOT NULL,
    expert_load jsonb,
    logged_at timestamp with time zone,
    received_at timestamp with time zone DEFAULT now() NOT NULL,
    lease_epoch bigint DEFAULT 0 NOT NULL,
    eval_bpc jsonb
);

CREATE TABLE public.metrics_p14 (
    run_id uuid NOT NULL,
    step bigint NOT NULL,
    attempt integer NOT NULL,
    tokens bigint NOT NULL,
    unique_tokens bigint NOT NULL,
    epoch double precision NOT NULL,
    train_bpc double precision NOT NULL,
    val_bpc double precision,
    learning_rate double precision NOT NULL,
    grad_norm double precision NOT NULL,
    aux_loss double precision NOT NULL,
    z_loss double precision NOT NULL,
    tokens_per_second double precision NOT NULL,
    flops_per_second double precision NOT NULL,
    flops double precision NOT NULL,
    expert_load jsonb,
    logged_at timestamp with time zone,
    received_at timestamp with time zone DEFAULT now() NOT NULL,
    lease_epoch bigint DEFAULT 0 NOT NULL,
    eval_bpc jsonb
);

CREATE TABLE public.metrics_p15 (
    run_id uuid NOT NULL,
    step bigint NOT NULL,
    attempt integer NOT NULL,
    tokens bigint NOT NULL,
    unique_tokens bigint NOT NULL,
    epoch double precision NOT NULL,
    train_bpc double precision NOT NULL,
    val_bpc double precision,
    learning_rate double precision NOT NULL,
    grad_norm double precision NOT NULL,
    aux_loss double precision NOT NULL,
    z_loss double precision NOT NULL,
    tokens_per_second double precision NOT NULL,
    flops_per_second double precision NOT NULL,
    flops double precision NOT NULL,
    expert_load jsonb,
    logged_at timestamp with time zone,
    received_at timestamp with time zone DEFAULT now() NOT NULL,
    lease_epoch bigint DEFAULT 0 NOT NULL,
    eval_bpc jsonb
);

CREATE TABLE public.reaper_liveness (
    singleton boolean DEFAULT true NOT NULL,
    last_pass_at timestamp with time zone NOT NULL,
    up_since timestamp with time zone NOT NULL,
    charge_from timestamp with time zone NOT NULL,
    reap_from timestamp with time zone NOT NULL,
    CONSTRAINT reaper_liveness_singleton_check CHECK (singleton)
);

CREATE VIEW public.results AS
 SELECT r.run_id,
    r.sweep_id,
    r.ordinal,
    r.name,
    r.role,
    r.layout,
    r.state,
    r.d_model,
    r.num_layers,
    r.num_experts,
    r.top_k,
    r.expert_hidden,
    r.params,
    r.active_params,
    r.activation_rate,
    r.flops_per_token AS planned_flops_per_token,
    r.measured_flops_per_token,
    (r.measured_flops_per_token / NULLIF(r.flops_per_token, (0)::double precision)) AS measured_over_planned_flops,
    r.compute_flops,
    r.tokens,
    r.unique_tokens,
    r.epochs,
    r.compute_budget,
    r.compute_multiple,
    r.data_variant,
    r.seed,
    r.predicted_efficiency_leverage,
    r.final_train_bpc,
    r.final_val_bpc,
    r.wall_seconds,
    r.attempt,
    (r.final_val_bpc - b.final_val_bpc) AS delta_bpc_vs_dense,
    r.final_eval_bpc,
    ( SELECT jsonb_object_agg(k.k, (((r.final_eval_bpc ->> k.k))::double precision - ((b.final_eval_bpc ->> k.k))::double precision)) AS jsonb_object_agg
           FROM jsonb_object_keys(r.final_eval_bpc) k(k)
          WHERE (b.final_eval_bpc ? k.k)) AS delta_eval_bpc_vs_dense,
    r.dataset_digest,
    r.ended_at,
    b.ended_at AS baseline_ended_at
   FROM (public.runs r
     LEFT JOIN LATERAL ( SELECT c.final_val_bpc,
            c.final_eval_bpc,
            c.ended_at
           FROM (( SELECT d.ordinal,
                    d.final_val_bpc,
                    d.final_eval_bpc,
                    d.ended_at
                   FROM public.runs d
                  WHERE ((d.sweep_id = r.sweep_id) AND (d.seed = r.seed) AND (d.state = 'SUCCEEDED'::text) AND (d.role = 'DENSE_BASELINE'::text) AND (d.compute_multiple = (1)::double precision) AND (d.compute_budget = r.compute_budget) AND (d.data_variant = r.data_variant))
                  ORDER BY d.ordinal
                 LIMIT 1)
                UNION ALL
                ( SELECT d.ordinal,
                    d.final_val_bpc,
                    d.final_eval_bpc,
                    d.ended_at
                   FROM public.runs d
                  WHERE ((d.sweep_id = r.sweep_id) AND (d.seed = r.seed) AND (d.state = 'SUCCEEDED'::text) AND (d.spec_json ? 'also_serves'::text) AND ((d.spec_json -> 'also_serves'::text) @> jsonb_build_array(jsonb_build_object('compute_budget', r.compute_budget, 'data_variant', r.data_variant, 'role', 'RUN_ROLE_DENSE_BASELINE', 'compute_multiple', 1))))
                  ORDER BY d.ordinal
                 LIMIT 1)) c
          ORDER BY c.ordinal
         LIMIT 1) b ON (true));

CREATE TABLE public.schema_migrations (
    version integer NOT NULL,
    name text NOT NULL,
    checksum text NOT NULL,
    applied_at timestamp with time zone DEFAULT now() NOT NULL
);

CREATE TABLE public.schema_repeatables (
    name text NOT NULL,
    checksum text NOT NULL,
    applied_at timestamp with time zone DEFAULT now() NOT NULL
);

CREATE TABLE public.server_keys (
    name text NOT NULL,
    key bytea NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT server_keys_key_check CHECK ((length(key) >= 32))
);

CREATE TABLE public.sweeps (
    sweep_id uuid NOT NULL,
    name text NOT NULL,
    spec_json jsonb NOT NULL,
    spec_bytes bytea NOT NULL,
    state text DEFAULT 'ACTIVE'::text NOT NULL,
    idempotency_key text,
    owner text NOT NULL,
    priority integer DEFAULT 0 NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    ended_at timestamp with time zone,
    metrics_thinned_at timestamp with time zone,
    events_pruned_at timestamp with time zone,
    CONSTRAINT sweeps_state_check CHECK ((state = ANY (ARRAY['ACTIVE'::text, 'SUCCEEDED'::text, 'FAILED'::text, 'CANCELLED'::text])))
);

CREATE TABLE public.workers (
    worker_id uuid NOT NULL,
    hostname text NOT NULL,
    devices jsonb NOT NULL,
    labels jsonb DEFAULT '{}'::jsonb NOT NULL,
    version text DEFAULT ''::text NOT NULL,
    registered_at timestamp with time zone DEFAULT now() NOT NULL,
    last_seen_at timestamp with time zone DEFAULT now() NOT NULL,
    owner text,
    datasets jsonb DEFAULT '[]'::jsonb NOT NULL
);

ALTER TABLE ONLY public.metrics ATTACH PARTITION public.metrics_p00 FOR VALUES WITH (modulus 16, remainder 0);

ALTER TABLE ONLY public.metrics ATTACH PARTITION public.metrics_p01 FOR VALUES WITH (modulus 16, remainder 1);

ALTER TABLE ONLY public.metrics ATTACH PARTITION public.metrics_p02 FOR VALUES WITH (modulus 16, remainder 2);

ALTER TABLE ONLY public.metrics ATTACH PARTITION public.metrics_p03 FOR VALUES WITH (modulus 16, remainder 3);

ALTER TABLE ONLY public.metrics ATTACH PARTITION public.metrics_p04 FOR VALUES WITH (modulus 16, remainder 4);

ALTER TABLE ONLY public.metrics ATTACH PARTITION public.metrics_p05 FOR VALUES WITH (modulus 16, remainder 5);

ALTER TABLE ONLY public.metrics ATTACH PARTITION public.metrics_p06 FOR VALUES WITH (modulus 16, remainder 6);

ALTER TABLE ONLY public.metrics ATTACH PARTITION public.metrics_p07 FOR VALUES WITH (modulus 16, remainder 7);

ALTER TABLE ONLY public.metrics ATTACH PARTITION public.metrics_p08 FOR VALUES WITH (modulus 16, remainder 8);

ALTER TABLE ONLY public.metrics ATTACH PARTITION public.metrics_p09 FOR VALUES WITH (modulus 16, remainder 9);

ALTER TABLE ONLY public.metrics ATTACH PARTITION public.metrics_p10 FOR VALUES WITH (modulus 16, remainder 10);

ALTER TABLE ONLY public.metrics ATTACH PARTITION public.metrics_p11 FOR VALUES WITH (modulus 16, remainder 11);

ALTER TABLE ONLY public.metrics ATTACH PARTITION public.metrics_p12 FOR VALUES WITH (modulus 16, remainder 12);

ALTER TABLE ONLY public.metrics ATTACH PARTITION public.metrics_p13 FOR VALUES WITH (modulus 16, remainder 13);

ALTER TABLE ONLY public.metrics ATTACH PARTITION public.metrics_p14 FOR VALUES WITH (modulus 16, remainder 14);

ALTER TABLE ONLY public.metrics ATTACH PARTITION public.metrics_p15 FOR VALUES WITH (modulus 16, remainder 15);

ALTER TABLE ONLY public.events ALTER COLUMN event_id SET DEFAULT nextval('public.events_event_id_seq'::regclass);

ALTER TABLE ONLY public.access_tokens
    ADD CONSTRAINT access_tokens_pkey PRIMARY KEY (token_id);

ALTER TABLE ONLY public.access_tokens
    ADD CONSTRAINT access_tokens_secret_sha256_key UNIQUE (secret_sha256);

ALTER TABLE ONLY public.events
    ADD CONSTRAINT events_pkey PRIMARY KEY (event_id);

ALTER TABLE ONLY public.gang_rendezvous
    ADD CONSTRAINT gang_rendezvous_pkey PRIMARY KEY (run_id);

ALTER TABLE ONLY public.gang_slots
    ADD CONSTRAINT gang_slots_pkey PRIMARY KEY (run_id, rank);

ALTER TABLE ONLY public.gang_waiting_workers
    ADD CONSTRAINT gang_waiting_workers_pkey PRIMARY KEY (worker_id);

ALTER TABLE ONLY public.leader_leases
    ADD CONSTRAINT leader_leases_pkey PRIMARY KEY (name);

ALTER TABLE ONLY public.metrics
    ADD CONSTRAINT metrics_pkey PRIMARY KEY (run_id, step);

ALTER TABLE ONLY public.metrics_p00
    ADD CONSTRAINT metrics_p00_pkey PRIMARY KEY (run_id, step);

ALTER TABLE ONLY public.metrics_p01
    ADD CONSTRAINT metrics_p01_pkey PRIMARY KEY (run_id, step);

ALTER TABLE ONLY public.metrics_p02
    ADD CONSTRAINT metrics_p02_pkey PRIMARY KEY (run_id, step);

ALTER TABLE ONLY public.metrics_p03
    ADD CONSTRAINT metrics_p03_pkey PRIMARY KEY (run_id, step);

ALTER TABLE ONLY public.metrics_p04
    ADD CONSTRAINT metrics_p04_pkey PRIMARY KEY (run_id, step);

ALTER TABLE ONLY public.metrics_p05
    ADD CONSTRAINT metrics_p05_pkey PRIMARY KEY (run_id, step);

ALTER TABLE ONLY public.metrics_p06
    ADD CONSTRAINT metrics_p06_pkey PRIMARY KEY (run_id, step);

ALTER TABLE ONLY public.metrics_p07
    ADD CONSTRAINT metrics_p07_pkey PRIMARY KEY (run_id, step);

ALTER TABLE ONLY public.metrics_p08
    ADD CONSTRAINT metrics_p08_pkey PRIMARY KEY (run_id, step);

ALTER TABLE ONLY public.metrics_p09
    ADD CONSTRAINT metrics_p09_pkey PRIMARY KEY (run_id, step);

ALTER TABLE ONLY public.metrics_p10
    ADD CONSTRAINT metrics_p10_pkey PRIMARY KEY (run_id, step);

ALTER TABLE ONLY public.metrics_p11
    ADD CONSTRAINT metrics_p11_pkey PRIMARY KEY (run_id, step);

ALTER TABLE ONLY public.metrics_p12
    ADD CONSTRAINT metrics_p12_pkey PRIMARY KEY (run_id, step);

ALTER TABLE ONLY public.metrics_p13
    ADD CONSTRAINT metrics_p13_pkey PRIMARY KEY (run_id, step);

ALTER TABLE ONLY public.metrics_p14
    ADD CONSTRAINT metrics_p14_pkey PRIMARY KEY (run_id, step);

ALTER TABLE ONLY public.metrics_p15
    ADD CONSTRAINT metrics_p15_pkey PRIMARY KEY (run_id, step);

ALTER TABLE ONLY public.reaper_liveness
    ADD CONSTRAINT reaper_liveness_pkey PRIMARY KEY (singleton);

ALTER TABLE ONLY public.runs
    ADD CONSTRAINT runs_pkey PRIMARY KEY (run_id);

ALTER TABLE ONLY public.runs
    ADD CONSTRAINT runs_sweep_id_ordinal_key UNIQUE (sweep_id, ordinal);

ALTER TABLE ONLY public.schema_migrations
    ADD CONSTRAINT schema_migrations_pkey PRIMARY KEY (version);

ALTER TABLE ONLY public.schema_repeatables
    ADD CONSTRAINT schema_repeatables_pkey PRIMARY KEY (name);

ALTER TABLE ONLY public.server_keys
    ADD CONSTRAINT server_keys_pkey PRIMARY KEY (name);

ALTER TABLE ONLY public.sweeps
    ADD CONSTRAINT sweeps_owner_idempotency_key_key UNIQUE (owner, idempotency_key);

ALTER TABLE ONLY public.sweeps
    ADD CONSTRAINT sweeps_pkey PRIMARY KEY (sweep_id);

ALTER TABLE ONLY public.workers
    ADD CONSTRAINT workers_pkey PRIMARY KEY (worker_id);

CREATE INDEX access_tokens_by_name ON public.access_tokens USING btree (name) WHERE (revoked_at IS NULL);

CREATE INDEX events_by_run ON public.events USING btree (run_id, event_id);

CREATE INDEX events_by_sweep_xid ON public.events USING btree (sweep_id, xid);

CREATE INDEX gang_slots_by_worker ON public.gang_slots USING btree (worker_id) WHERE (NOT delivered);

CREATE INDEX runs_live_by_sweep ON public.runs USING btree (sweep_id) WHERE (state = ANY (ARRAY['LEASED'::text, 'RUNNING'::text]));

CREATE INDEX runs_live_leases ON public.runs USING btree (lease_expires_at) WHERE (state = ANY (ARRAY['LEASED'::text, 'RUNNING'::text]));

CREATE INDEX runs_pending_by_sweep ON public.runs USING btree (sweep_id, ordinal) WHERE (state = 'PENDING'::text);

CREATE INDEX runs_pending_gangs ON public.runs USING btree (priority DESC, not_before) WHERE ((state = 'PENDING'::text) AND (ranks > 1));

CREATE INDEX runs_pending_queue ON public.runs USING btree (sweep_id, ((ordinal)::bigint)) WHERE (state = 'PENDING'::text);

CREATE INDEX runs_succeeded_dense_1c ON public.runs USING btree (sweep_id, seed, compute_budget, data_variant, ordinal) WHERE ((state = 'SUCCEEDED'::text) AND (role = 'DENSE_BASELINE'::text) AND (compute_multiple = (1)::double precision));

CREATE INDEX runs_succeeded_serving ON public.runs USING btree (sweep_id, seed, ordinal) WHERE ((state = 'SUCCEEDED'::text) AND (spec_json ? 'also_serves'::text));

CREATE INDEX sweeps_active_by_owner ON public.sweeps USING btree (owner) WHERE (state = 'ACTIVE'::text);

CREATE INDEX sweeps_created ON public.sweeps USING btree (created_at DESC, sweep_id DESC);

CREATE INDEX sweeps_open ON public.sweeps USING btree (priority DESC, created_at) WHERE (ended_at IS NULL);

CREATE INDEX workers_last_seen ON public.workers USING btree (last_seen_at DESC, worker_id DESC);

ALTER INDEX public.metrics_pkey ATTACH PARTITION public.metrics_p00_pkey;

ALTER INDEX public.metrics_pkey ATTACH PARTITION public.metrics_p01_pkey;

ALTER INDEX public.metrics_pkey ATTACH PARTITION public.metrics_p02_pkey;

ALTER INDEX public.metrics_pkey ATTACH PARTITION public.metrics_p03_pkey;

ALTER INDEX public.metrics_pkey ATTACH PARTITION public.metrics_p04_pkey;

ALTER INDEX public.metrics_pkey ATTACH PARTITION public.metrics_p05_pkey;

ALTER INDEX public.metrics_pkey ATTACH PARTITION public.metrics_p06_pkey;

ALTER INDEX public.metrics_pkey ATTACH PARTITION public.metrics_p07_pkey;

ALTER INDEX public.metrics_pkey ATTACH PARTITION public.metrics_p08_pkey;

ALTER INDEX public.metrics_pkey ATTACH PARTITION public.metrics_p09_pkey;

ALTER INDEX public.metrics_pkey ATTACH PARTITION public.metrics_p10_pkey;

ALTER INDEX public.metrics_pkey ATTACH PARTITION public.metrics_p11_pkey;

ALTER INDEX public.metrics_pkey ATTACH PARTITION public.metrics_p12_pkey;

ALTER INDEX public.metrics_pkey ATTACH PARTITION public.metrics_p13_pkey;

ALTER INDEX public.metrics_pkey ATTACH PARTITION public.metrics_p14_pkey;

ALTER INDEX public.metrics_pkey ATTACH PARTITION public.metrics_p15_pkey;

CREATE TRIGGER runs_became_pending AFTER UPDATE OF state ON public.runs FOR EACH ROW WHEN (((new.state = 'PENDING'::text) AND (old.state <> 'PENDING'::text))) EXECUTE FUNCTION public.notify_run_pending();

CREATE TRIGGER runs_deleted_with_records AFTER DELETE ON public.runs REFERENCING OLD TABLE AS deleted_runs FOR EACH STATEMENT EXECUTE FUNCTION public.delete_records_of_deleted_runs();

CREATE TRIGGER runs_pending_after_insert AFTER INSERT ON public.runs REFERENCING NEW TABLE AS changed_runs FOR EACH STATEMENT EXECUTE FUNCTION public.notify_runs_pending();

ALTER TABLE ONLY public.gang_rendezvous
    ADD CONSTRAINT gang_rendezvous_run_id_fkey FOREIGN KEY (run_id) REFERENCES public.runs(run_id) ON DELETE CASCADE;

ALTER TABLE ONLY public.gang_slots
    ADD CONSTRAINT gang_slots_run_id_fkey FOREIGN KEY (run_id) REFERENCES public.runs(run_id) ON DELETE CASCADE;

ALTER TABLE ONLY public.gang_waiting_workers
    ADD CONSTRAINT gang_waiting_workers_worker_id_fkey FOREIGN KEY (worker_id) REFERENCES public.workers(worker_id) ON DELETE CASCADE;

ALTER TABLE ONLY public.runs
    ADD CONSTRAINT runs_sweep_id_fkey FOREIGN KEY (sweep_id) REFERENCES public.sweeps(sweep_id) ON DELETE CASCADE;
