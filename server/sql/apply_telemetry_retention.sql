-- apply_telemetry_retention: one pass of the scheduler's telemetry retention
-- (PostgresRunStore::ApplyRetention; the policy is RetentionPolicy, server/store/
-- telemetry_retention.h). Three jobs, each bounded so that a pass stays short:
--   metrics  of up to p_sweeps sweeps ended more than p_metrics_age seconds ago and not yet
--            thinned: each run's curve keeps every evaluation point (val_bpc set), its last
--            point and every k-th training point, k = ceil(points / p_points), so at most
--            p_points training points plus the evaluations remain;
--   events   of up to p_sweeps sweeps ended more than p_events_age seconds ago and not yet
--            pruned: each run keeps only its last event (how it ended);
--   workers  not seen for p_workers_age seconds and holding no live lease are forgotten (a
--            worker that comes back registers again).
-- Sweeps are taken oldest-ended first, with SKIP LOCKED, so two replicas share the work.
CREATE OR REPLACE FUNCTION apply_telemetry_retention(p_metrics_age double precision,
                                                     p_points integer,
                                                     p_events_age double precision,
                                                     p_workers_age double precision,
                                                     p_sweeps integer)
RETURNS TABLE (sweeps_thinned integer, points_deleted bigint, sweeps_pruned integer,
               events_deleted bigint, workers_deleted integer) LANGUAGE plpgsql AS $$
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
