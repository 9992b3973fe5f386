-- 0011: what honest completions, the preemption cap and telemetry retention need.
-- A run's preemptions, counted apart from its attempts: a preempted attempt is not spent, up to
-- the scheduler's cap (RetryPolicy::max_preemptions); an engine that keeps exiting "preempted"
-- then spends attempts instead of cycling forever.
ALTER TABLE runs ADD COLUMN preemptions integer NOT NULL DEFAULT 0;
-- complete_runs_success checks each summary against the run's plan and says why one disagrees:
-- a new column in its RETURNS TABLE, which CREATE OR REPLACE cannot add
-- (server/sql/complete_runs_success.sql creates it again).
DROP FUNCTION complete_runs_success(uuid[], bigint[], double precision[], double precision[],
                                    bigint[], bigint[], double precision[], double precision[],
                                    bigint[], double precision[], bigint[], text[]);
-- Telemetry retention (apply_telemetry_retention, server/sql/): when an ended sweep's metric
-- curves were thinned and its events pruned, so that each is done once per sweep.
ALTER TABLE sweeps ADD COLUMN metrics_thinned_at timestamp with time zone,
                   ADD COLUMN events_pruned_at timestamp with time zone;
