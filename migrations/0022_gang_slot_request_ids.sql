-- 0022: a gang slot remembers the LeaseRun attempt it was delivered to (LeaseRunRequest.request_id),
-- so that a retry of that attempt whose answer was lost (same worker, same id, retry = true) is
-- answered again with the same slots under the same epoch (GangQueue::AnswerGangAgain) instead of
-- leaving the gang to wait out its rendezvous timeout, as 0020 did for ordinary leases. NULL =
-- not delivered, or delivered to a call without an id.
ALTER TABLE gang_slots ADD COLUMN delivered_request_id text;
