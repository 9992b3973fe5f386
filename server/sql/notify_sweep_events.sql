-- notify_sweep_events: the function of trigger events_notify_sweep
-- (events_notify_sweep.trigger.sql). Wakes the watch feeds of every replica (PgListener LISTENs
-- on parity_sweep_events; SweepsService::WakeWatchers) with the sweep id of each sweep the
-- inserting statement wrote events for: a lease batch over three sweeps sends three, and
-- PostgreSQL folds equal payloads within a transaction into one. The notification only wakes:
-- the feed reads the events by commit horizon, so one that is lost, or arrives before the
-- horizon passes its transaction, costs latency (the feed polls anyway), never an event.
CREATE OR REPLACE FUNCTION notify_sweep_events() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  sweep uuid;
BEGIN
  FOR sweep IN SELECT DISTINCT sweep_id FROM inserted_events LOOP
    PERFORM pg_notify('parity_sweep_events', sweep::text);
  END LOOP;
  RETURN NULL;
END $$;
