-- 0016: every worker trains on the same data (issue #24).
-- The datasets a worker holds, as it verified them at start (parity.v1.DatasetHolding as proto
-- JSON, one object per dataset): SubmitSweep pins data.dataset_digest from the live workers'
-- holdings and warns when none holds the sweep's dataset.
ALTER TABLE workers ADD COLUMN datasets jsonb NOT NULL DEFAULT '[]';
-- DATA_MISMATCH: the worker's copy is not the dataset the sweep pinned (another manifest digest,
-- a shard missing or altered); never retried.
ALTER TABLE runs DROP CONSTRAINT runs_failure_class_check;
ALTER TABLE runs ADD CONSTRAINT runs_failure_class_check
  CHECK (failure_class IN ('PREEMPTED', 'INFRASTRUCTURE', 'OUT_OF_MEMORY', 'USER_ERROR',
                           'LEASE_EXPIRED', 'DIVERGED', 'HUNG', 'INVALID_RESULT',
                           'DATA_MISMATCH'));
-- The SHA-256 of the dataset a run's successful attempt trained on (RunSummary.dataset_digest);
-- NULL until then, or when neither the engine nor the worker said.
ALTER TABLE runs ADD COLUMN dataset_digest text;
-- complete_runs_success takes the digests as one more array (server/sql/); the old signature
-- goes first so the file does not create an overload beside it.
DROP FUNCTION IF EXISTS complete_runs_success(uuid[], bigint[], double precision[],
  double precision[], bigint[], bigint[], double precision[], double precision[], bigint[],
  double precision[], bigint[], text[]);
