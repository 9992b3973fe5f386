-- runs_became_pending: a run that goes back to PENDING wakes idle long polls
-- (notify_run_pending.sql). Row-level with a WHEN clause, so that leases, heartbeats and
-- completions (which never make a run PENDING) cost a comparison of the old and new state and
-- nothing else; a statement-level trigger with a transition table copied every updated row
-- (spec included) only to ask that.
CREATE OR REPLACE TRIGGER runs_became_pending AFTER UPDATE OF state ON runs FOR EACH ROW
  WHEN (NEW.state = 'PENDING' AND OLD.state <> 'PENDING')
  EXECUTE FUNCTION notify_run_pending();
