-- ReadModels' statements: results, event feeds, counts, metric listings and samples, a run's
-- gang (postgres_run_store.cc, postgres_run_counts.cc, postgres_metric_sampling.cc).

-- fragment: results_filter
-- QueryResults' filter, on runs or the results view (the same column names): $1 sweep ('' =
-- all), $2 states text[] ('{}' = all), $3 layout ('' = all), $4 least activation rate (0 =
-- none), $5 greatest (0 = none). The rates are cast: "$4 = 0" alone would make them integers,
-- and a bound of 0.25 an error.
($1 = '' OR sweep_id = $1::uuid)
  AND (cardinality($2::text[]) = 0 OR state = ANY($2::text[])) AND ($3 = '' OR layout = $3)
  AND ($4::float8 = 0 OR activation_rate >= $4::float8)
  AND ($5::float8 = 0 OR activation_rate <= $5::float8)

-- fragment: results_as_of
-- The walk's start: $11, microseconds since the epoch in a page token, or now() on a first page.
coalesce(timestamptz 'epoch' + $11::bigint * interval '1 microsecond', now())

-- name: query_results_in_grid_order
-- unprepared: planned per call with its values, so that the sweep's index is used. Keyset
-- paging in grid order (sweep, ordinal): the filter's $1-$5, $6 limit, $7 whether a cursor
-- follows, $8 its sweep, $9 its ordinal (a valid uuid and 0 when none). Costs a probe of
-- runs_sweep_id_ordinal_key and one baseline lookup per row served, however deep the page.
SELECT *, '' AS page_key, 0::bigint AS page_as_of FROM results
WHERE {{results_filter}}
  AND (NOT $7::boolean OR (sweep_id, ordinal) > ($8::uuid, $9::integer))
ORDER BY sweep_id, ordinal
LIMIT $6

-- fragment: results_page_by_key
-- The rest of a query_results_by_* statement after its `keyed (run_id, k)`: the page after the
-- cursor in the order of k, NULLs last, ties by run id, then the results view's rows of that
-- page only (one baseline lookup per row served). $6 limit, $7 whether a cursor follows, $8
-- whether its key is NULL, $9 its key (typed as k), $10 its run id (a valid uuid when none),
-- $11 the walk's start (results_as_of). {{after}} (> or <) and {{direction}} (ASC or DESC) are
-- the order's, filled in per call.
page AS (
  SELECT run_id, k FROM keyed
  WHERE NOT $7::boolean
     OR CASE WHEN $8::boolean THEN k IS NULL AND run_id > $10::uuid
        ELSE k {{after}} $9 OR (k = $9 AND run_id > $10::uuid) OR k IS NULL END
  ORDER BY k {{direction}} NULLS LAST, run_id
  LIMIT $6)
SELECT res.*, p.k::text AS page_key,
       (extract(epoch FROM {{results_as_of}}) * 1000000)::bigint AS page_as_of
FROM page p JOIN results res USING (run_id)
ORDER BY p.k {{direction}} NULLS LAST, p.run_id

-- name: query_results_by_column
-- unprepared: {{column}} is a column of runs no run's progress changes (a planned column of
-- kResultsOrderColumns in read_models.h, checked; never pasted from a request unchecked). The
-- parameters of results_filter and results_page_by_key. Sorts the matching runs' keys (no
-- baseline lookups), so a page costs a scan of the sweep's runs, not of the view.
WITH keyed AS (SELECT run_id, {{column}} AS k FROM runs WHERE {{results_filter}}),
{{results_page_by_key}}

-- name: query_results_by_outcome
-- unprepared: {{column}} is a column a success writes (measured_flops_per_token,
-- final_val_bpc, wall_seconds; checked), ordered as it was at the walk's start: NULL unless
-- the run had ended by then (ended_at is set once, with the success). Else as
-- query_results_by_column.
WITH keyed AS (
  SELECT run_id, CASE WHEN ended_at <= {{results_as_of}} THEN {{column}} END AS k
  FROM runs WHERE {{results_filter}}),
{{results_page_by_key}}

-- name: query_results_by_state
-- unprepared: {{after}} and {{direction}} filled in. Each run's state at the walk's start: its
-- state when it has not changed since, else its last event's by then (NULL for a run created
-- since). Else as query_results_by_column.
WITH keyed AS (
  SELECT r.run_id,
         CASE WHEN r.updated_at <= {{results_as_of}} THEN r.state
         ELSE (SELECT e.to_state FROM events e
               WHERE e.run_id = r.run_id AND e.created_at <= {{results_as_of}}
               ORDER BY e.event_id DESC LIMIT 1) END AS k
  FROM runs r WHERE {{results_filter}}),
{{results_page_by_key}}

-- name: query_results_by_delta
-- unprepared: {{after}} and {{direction}} filled in. ΔBPC at the walk's start: NULL unless
-- the run and its baseline had both succeeded by then. The baseline is the view's (the first
-- 1C dense run in grid order of the same sweep, seed, compute budget and data variant that
-- SUCCEEDED, its own group or one it also serves), but found once per group here and joined to
-- the runs by hash: a page costs a scan of the matching runs and of the sweep's succeeded
-- baselines, not a baseline lookup per run (the view's key took ≈ 1 s a page at 100,000 runs).
-- The page's rows still come from the view, which computes the same ΔBPC.
WITH candidates AS (
  SELECT d.sweep_id, d.seed, d.compute_budget, d.data_variant, d.ordinal, d.final_val_bpc,
         d.ended_at
  FROM runs d
  WHERE ($1 = '' OR d.sweep_id = $1::uuid) AND d.state = 'SUCCEEDED'
    AND d.role = 'DENSE_BASELINE' AND d.compute_multiple = 1
  UNION ALL
  SELECT d.sweep_id, d.seed, s ->> 'compute_budget', s ->> 'data_variant', d.ordinal,
         d.final_val_bpc, d.ended_at
  FROM runs d CROSS JOIN LATERAL jsonb_array_elements(d.spec_json -> 'also_serves') AS s
  WHERE ($1 = '' OR d.sweep_id = $1::uuid) AND d.state = 'SUCCEEDED'
    AND d.spec_json ? 'also_serves' AND jsonb_typeof(d.spec_json -> 'also_serves') = 'array'
    AND s ->> 'role' = 'RUN_ROLE_DENSE_BASELINE'
    AND jsonb_typeof(s -> 'compute_multiple') = 'number'
    AND (s ->> 'compute_multiple')::float8 = 1),
baselines AS (
  SELECT DISTINCT ON (sweep_id, seed, compute_budget, data_variant) *
  FROM candidates
  ORDER BY sweep_id, seed, compute_budget, data_variant, ordinal),
keyed AS (
  SELECT r.run_id,
         CASE WHEN r.ended_at <= {{results_as_of}} AND b.ended_at <= {{results_as_of}}
              THEN r.final_val_bpc - b.final_val_bpc END AS k
  FROM (SELECT * FROM runs WHERE {{results_filter}}) r
  LEFT JOIN baselines b
    ON b.sweep_id = r.sweep_id AND b.seed = r.seed AND b.compute_budget = r.compute_budget
   AND b.data_variant = r.data_variant),
{{results_page_by_key}}

-- fragment: event_columns
SELECT event_id, run_id::text, coalesce(from_state, '') AS from_state, to_state, attempt,
       reason, (extract(epoch FROM created_at) * 1000000)::bigint AS created_us
FROM events

-- name: sweep_events
-- $1 sweep, $2 previous horizon, $3 current horizon (xid8 as text).
{{event_columns}}
WHERE sweep_id = $1 AND xid >= $2::text::xid8 AND xid < $3::text::xid8
ORDER BY xid, event_id

-- name: event_horizon
SELECT pg_snapshot_xmin(pg_current_snapshot())::text

-- name: run_events
-- $1 run, $2 last event id seen, $3 limit.
{{event_columns}} WHERE run_id = $1 AND event_id > $2 ORDER BY event_id LIMIT $3

-- name: count_runs_by_state
-- $1 how many unfinished sweeps to count one by one (newest first). Every other sweep's runs
-- fall into the row with sweep_id ''. One grouped scan of runs.
WITH shown AS (SELECT sweep_id, name FROM sweeps WHERE ended_at IS NULL
               ORDER BY created_at DESC, sweep_id DESC LIMIT $1)
SELECT coalesce(shown.sweep_id::text, '') AS sweep_id, coalesce(shown.name, '') AS sweep_name,
       r.state, count(*) AS runs
FROM runs r LEFT JOIN shown ON shown.sweep_id = r.sweep_id
GROUP BY 1, 2, 3

-- name: count_queue_and_workers
-- $1 live-worker window (seconds). What lease_runs could hand out now, ignoring whether a
-- worker's devices fit; and the workers seen within the window.
SELECT (SELECT count(*) FROM runs r JOIN sweeps s ON s.sweep_id = r.sweep_id
        WHERE r.state = 'PENDING' AND r.not_before <= now() AND s.ended_at IS NULL) AS ready,
       (SELECT count(*) FROM workers
        WHERE last_seen_at >= now() - make_interval(secs => $1)) AS live_workers

-- name: list_metrics
-- $1 run, $2 first step, $3 limit.
SELECT step, attempt, tokens, unique_tokens, epoch, train_bpc, val_bpc, learning_rate,
       grad_norm, aux_loss, z_loss, tokens_per_second, flops_per_second, flops,
       expert_load::text AS expert_load, eval_bpc::text AS eval_bpc,
       (extract(epoch FROM logged_at) * 1000000)::bigint AS logged_us
FROM metrics WHERE run_id = $1 AND step >= $2 ORDER BY step LIMIT $3

-- name: sample_metrics
-- unprepared: runs only when a dashboard page asks. $1 runs (uuid[]), $2 points per run, $3
-- evaluations only, $4 expert load summaries. `picked` is, per run, the first point at or after
-- each target step 0, s, 2s, ... up to the run's latest step (s = its stride), plus its last
-- point. `walk` finds them by skipping: from a found point p the next target is the first
-- multiple of s past p (targets between map to p), so each index lookup (the metrics primary key
-- is (run_id, step)) finds a new point: a page costs at most min(points, the run's points) + 2
-- lookups per run, never a scan of the run's history or of the table; a run without points costs
-- two. The rows are then fetched by key (LIMIT 1 keeps that a lookup per point: a plain join was
-- planned as a hash join over every partition of metrics). Shares are stripped from the expert
-- load here so they never leave the database.
WITH RECURSIVE target AS (
  SELECT run_id, latest_step, (latest_step + $2::bigint) / $2::bigint AS stride
  FROM runs WHERE run_id = ANY($1::uuid[])),
walk AS (
  SELECT t.run_id, t.stride, t.latest_step,
         (SELECT m.step FROM metrics m
          WHERE m.run_id = t.run_id AND (NOT $3::boolean OR m.val_bpc IS NOT NULL)
          ORDER BY m.step LIMIT 1) AS step
  FROM target t
  UNION ALL
  SELECT w.run_id, w.stride, w.latest_step,
         (SELECT m.step FROM metrics m
          WHERE m.run_id = w.run_id AND m.step >= (w.step / w.stride + 1) * w.stride
            AND (NOT $3::boolean OR m.val_bpc IS NOT NULL)
          ORDER BY m.step LIMIT 1)
  FROM walk w
  WHERE w.step IS NOT NULL AND (w.step / w.stride + 1) * w.stride <= w.latest_step),
picked AS (
  SELECT run_id, step FROM walk WHERE step IS NOT NULL
  UNION
  SELECT t.run_id, (SELECT m.step FROM metrics m
                    WHERE m.run_id = t.run_id AND (NOT $3::boolean OR m.val_bpc IS NOT NULL)
                    ORDER BY m.step DESC LIMIT 1)
  FROM target t)
SELECT m.run_id::text AS run_id, m.step, m.attempt, m.tokens, m.unique_tokens, m.epoch,
       m.train_bpc, m.val_bpc, m.learning_rate, m.grad_norm, m.aux_loss, m.z_loss,
       m.tokens_per_second, m.flops_per_second, m.flops,
       CASE WHEN $4::boolean AND m.expert_load IS NOT NULL THEN
         (SELECT jsonb_agg(e.load - 'shares' ORDER BY e.position)
          FROM jsonb_array_elements(m.expert_load) WITH ORDINALITY AS e(load, position))::text
       END AS expert_load, m.eval_bpc::text AS eval_bpc,
       (extract(epoch FROM m.logged_at) * 1000000)::bigint AS logged_us
FROM picked p
CROSS JOIN LATERAL (SELECT * FROM metrics x WHERE x.run_id = p.run_id AND x.step = p.step
                    LIMIT 1) m
ORDER BY m.run_id, m.step

-- name: run_gang
-- $1 run: its gang's placement under the run's current lease epoch, one row per rank, lowest
-- first, each with its worker's hostname ('' once retention forgot the worker). No row: a run
-- of one rank, a PENDING run (a reaped gang's rows stay until its next placement) or a
-- placement a failure cleared. Times in microseconds since the epoch; NULL until they happen.
SELECT g.world_size, g.lease_epoch,
       (extract(epoch FROM g.placed_at) * 1000000)::bigint AS placed_us,
       (extract(epoch FROM g.deadline) * 1000000)::bigint AS deadline_us,
       (extract(epoch FROM g.released_at) * 1000000)::bigint AS released_us,
       s.rank, s.worker_id::text AS worker_id, coalesce(w.hostname, '') AS hostname,
       s.device_indices::text AS devices,
       (extract(epoch FROM s.checked_in_at) * 1000000)::bigint AS checked_in_us
FROM runs r
JOIN gang_rendezvous g ON g.run_id = r.run_id AND g.lease_epoch = r.lease_epoch
JOIN gang_slots s ON s.run_id = g.run_id AND s.lease_epoch = g.lease_epoch
LEFT JOIN workers w ON w.worker_id = s.worker_id
WHERE r.run_id = $1::uuid AND r.state <> 'PENDING'
ORDER BY s.rank
