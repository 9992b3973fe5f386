-- runs_deleted_with_records: deleting runs (DELETE FROM sweeps cascades to them) deletes their
-- events and metrics (delete_records_of_deleted_runs.sql). Statement-level: one pass per
-- deleting statement, however many runs it deletes.
CREATE OR REPLACE TRIGGER runs_deleted_with_records AFTER DELETE ON runs
  REFERENCING OLD TABLE AS deleted_runs
  FOR EACH STATEMENT EXECUTE FUNCTION delete_records_of_deleted_runs();
