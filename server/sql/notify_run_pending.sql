-- notify_run_pending: the function of trigger runs_became_pending
-- (runs_became_pending.trigger.sql). Wakes idle long polls when a run went back to PENDING (a
-- retry, an expired lease); notifications with the same payload fold into one per transaction.
CREATE OR REPLACE FUNCTION notify_run_pending() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_notify('parity_runs_pending', '');
  RETURN NULL;
END $$;
