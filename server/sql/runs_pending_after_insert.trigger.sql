-- runs_pending_after_insert: a submission's new PENDING runs wake idle long polls
-- (notify_runs_pending.sql). Statement-level with a transition table, so that one INSERT of a
-- whole sweep sends one notification.
CREATE OR REPLACE TRIGGER runs_pending_after_insert AFTER INSERT ON runs
  REFERENCING NEW TABLE AS changed_runs
  FOR EACH STATEMENT EXECUTE FUNCTION notify_runs_pending();
