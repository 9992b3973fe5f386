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
