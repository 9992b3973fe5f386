-- ReadModels' statements: results, event feeds, counts, metric listings and samples
-- (postgres_run_store.cc, postgres_run_counts.cc, postgres_metric_sampling.cc).

-- name: query_results
-- unprepared: {{order_by}} is filled in per call with a column of kResultsOrderColumns
-- (read_models.h; checked before, never pasted from a request unchecked) and "NULLS LAST,
-- run_id", or "sweep_id, ordinal" for grid order. $1 sweep ('' = all), $2 states text[] ('{}' =
-- all), $3 layout ('' = all), $4 least activation rate (0 = none), $5 greatest (0 = none), $6
-- limit, $7 offset (the page token). The rates are cast: "$4 = 0" alone would make them
-- integers, and a bound of 0.25 an error.
SELECT * FROM results
WHERE ($1 = '' OR sweep_id = $1::uuid)
  AND (cardinality($2::text[]) = 0 OR state = ANY($2::text[])) AND ($3 = '' OR layout = $3)
  AND ($4::float8 = 0 OR activation_rate >= $4::float8)
  AND ($5::float8 = 0 OR activation_rate <= $5::float8)
ORDER BY {{order_by}} LIMIT $6 OFFSET $7

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
-- evaluations only, $4 expert load summaries. The sample is chosen by step, with one index
-- lookup per wanted point (the metrics primary key is (run_id, step)): a 100k-point run costs
-- the same as a 1k-point one. `picked` is each target step's first point at or after it, plus
-- the last point; shares are stripped from the expert load here so they never leave the
-- database.
WITH target AS (
  SELECT run_id, latest_step, (latest_step + $2::bigint) / $2::bigint AS stride
  FROM runs WHERE run_id = ANY($1::uuid[])),
picked AS (
  SELECT t.run_id, m.step FROM target t
  CROSS JOIN LATERAL generate_series(0::bigint, t.latest_step, t.stride) AS s(from_step)
  CROSS JOIN LATERAL (
    SELECT step FROM metrics
    WHERE run_id = t.run_id AND step >= s.from_step AND (NOT $3::boolean OR val_bpc IS NOT NULL)
    ORDER BY step LIMIT 1) m
  UNION
  SELECT t.run_id, m.step FROM target t
  CROSS JOIN LATERAL (
    SELECT step FROM metrics
    WHERE run_id = t.run_id AND (NOT $3::boolean OR val_bpc IS NOT NULL)
    ORDER BY step DESC LIMIT 1) m)
SELECT m.run_id::text AS run_id, m.step, m.attempt, m.tokens, m.unique_tokens, m.epoch,
       m.train_bpc, m.val_bpc, m.learning_rate, m.grad_norm, m.aux_loss, m.z_loss,
       m.tokens_per_second, m.flops_per_second, m.flops,
       CASE WHEN $4::boolean AND m.expert_load IS NOT NULL THEN
         (SELECT jsonb_agg(e.load - 'shares' ORDER BY e.position)
          FROM jsonb_array_elements(m.expert_load) WITH ORDINALITY AS e(load, position))::text
       END AS expert_load, m.eval_bpc::text AS eval_bpc,
       (extract(epoch FROM m.logged_at) * 1000000)::bigint AS logged_us
FROM picked p JOIN metrics m ON m.run_id = p.run_id AND m.step = p.step
ORDER BY m.run_id, m.step
