-- delete_records_of_deleted_runs: the function of trigger runs_deleted_with_records
-- (runs_deleted_with_records.trigger.sql). events and metrics have no foreign key to runs
-- (the scheduler writes both only in the transaction that creates or locks the run, and the
-- events' key check cost every lease and completion a lookup); this deletes a run's events and
-- metrics with the run. By run_id = ANY: through each table's index on run_id, whatever the
-- planner thinks of the transition table against a metrics table of ~100M rows.
CREATE OR REPLACE FUNCTION delete_records_of_deleted_runs() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  v_runs uuid[] := ARRAY(SELECT run_id FROM deleted_runs);
BEGIN
  DELETE FROM events WHERE run_id = ANY (v_runs);
  DELETE FROM metrics WHERE run_id = ANY (v_runs);
  RETURN NULL;
END $$;
