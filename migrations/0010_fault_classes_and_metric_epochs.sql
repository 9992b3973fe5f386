-- 0010: what fault handling needs in the schema.
-- Three failure classes (parity.v1.FailureClass): DIVERGED (a non-finite loss; never retried),
-- HUNG (no training progress within the worker's progress timeout; retried) and INVALID_RESULT
-- (an exit 0 whose summary does not match the plan; never retried).
ALTER TABLE runs DROP CONSTRAINT runs_failure_class_check;
ALTER TABLE runs ADD CONSTRAINT runs_failure_class_check
  CHECK (failure_class IN ('PREEMPTED', 'INFRASTRUCTURE', 'OUT_OF_MEMORY', 'USER_ERROR',
                           'LEASE_EXPIRED', 'DIVERGED', 'HUNG', 'INVALID_RESULT'));
-- The lease a metric point was stored under, so that a newer lease's point for a step replaces
-- an older lease's (a resume from an earlier checkpoint trains those steps again) and a resend
-- under the same lease changes nothing (append_metric_arrays). Points stored before 0010 count
-- as lease 0, older than any.
ALTER TABLE metrics ADD COLUMN lease_epoch bigint NOT NULL DEFAULT 0;
