-- events_notify_sweep: inserted run events wake the watch feeds of their sweeps
-- (notify_sweep_events.sql). Statement-level with a transition table, so that a statement that
-- inserts a batch of events (a lease batch, a cancelled sweep) sends one notification per sweep,
-- not one per row.
CREATE OR REPLACE TRIGGER events_notify_sweep AFTER INSERT ON events
  REFERENCING NEW TABLE AS inserted_events
  FOR EACH STATEMENT EXECUTE FUNCTION notify_sweep_events();
