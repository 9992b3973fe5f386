-- 0015: validation BPC per named evaluation set (DataSpec.eval_sets: "validation" first, then
-- e.g. "code"), at every evaluation step and at the end of a run.
--
-- Per point: one jsonb object {"validation": 1.93, "code": 2.41} (MetricPoint.eval_bpc), NULL
-- at the steps without evaluation (most of them) and for points of engines that report only
-- val_bpc. Why jsonb and not parallel arrays or a table: the set names differ between sweeps
-- (a column per set is out), PostgreSQL's multi-dimensional arrays must be rectangular, and a
-- row per (point, set) would add an insert per set to the append path; one jsonb per point rides
-- in the same INSERT as one more unnest array (as expert_load does), costs nothing at training
-- steps, and is read whole with its point. val_bpc stays the primary set's value, so every
-- reader of val_bpc (curves, retention, latest_val_bpc) is unchanged.
ALTER TABLE metrics ADD COLUMN eval_bpc jsonb;
-- Per run: RunSummary.final_eval_bpc (the same object, final values), NULL until a success
-- reports it. (The digest of the dataset a run trained on is 0016's runs.dataset_digest.)
ALTER TABLE runs ADD COLUMN final_eval_bpc jsonb;
-- Their writers take one more array each (server/sql/append_metric_arrays.sql,
-- complete_runs_success.sql): drop the old signatures so that the files create the new ones
-- instead of overloads beside them (IF EXISTS: a fresh database gets the functions only after
-- the last migration).
DROP FUNCTION IF EXISTS append_metric_arrays(
  uuid, bigint, boolean, bigint[], integer[], bigint[], bigint[], double precision[],
  double precision[], double precision[], double precision[], double precision[],
  double precision[], double precision[], double precision[], double precision[],
  double precision[], jsonb[], bigint[]);
DROP FUNCTION IF EXISTS complete_runs_success(
  uuid[], bigint[], double precision[], double precision[], bigint[], bigint[],
  double precision[], double precision[], bigint[], double precision[], bigint[], text[]);
