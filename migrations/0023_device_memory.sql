-- 0023: a run's peak device memory beside the planner's estimate (issue #26, "memory that tells
-- the truth"). runs.peak_memory_bytes stays the engine's peak RSS on the host; these are
-- RunSummary.peak_device_memory_bytes (the high-water mark of the memory the engine's device
-- handed out) and estimated_device_memory_bytes (core/memory_estimate.h for the run's own config),
-- in bytes. NULL until a success reports them, or when the engine did not (an older engine).
ALTER TABLE runs ADD COLUMN peak_device_memory_bytes bigint;
ALTER TABLE runs ADD COLUMN estimated_device_memory_bytes bigint;
-- complete_runs_success takes them as two more arrays (server/sql/); the old signature goes
-- first so the file does not create an overload beside it.
DROP FUNCTION IF EXISTS complete_runs_success(uuid[], bigint[], double precision[],
  double precision[], bigint[], bigint[], double precision[], double precision[], bigint[],
  double precision[], bigint[], text[], jsonb[], text[]);
