-- notify_runs_pending: the function of trigger runs_pending_after_insert
-- (runs_pending_after_insert.trigger.sql). Wakes idle long polls (PgListener LISTENs on
-- parity_runs_pending) when a statement inserted PENDING runs: a 300-run submission sends one
-- notification. The notification only wakes: the lease transaction decides who gets the run.
CREATE OR REPLACE FUNCTION notify_runs_pending() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF EXISTS (SELECT 1 FROM changed_runs WHERE state = 'PENDING') THEN
    PERFORM pg_notify('parity_runs_pending', '');
  END IF;
  RETURN NULL;
END $$;
