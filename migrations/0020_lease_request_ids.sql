-- 0020: a lease whose answer was lost is given back to its worker, not orphaned (issue #25).
-- LeaseRunRequest.request_id is recorded with the lease it got; a retry of that call (same
-- worker, same id, retry = true) finds the run still LEASED to it and is answered again instead
-- of leasing another while the first waits out its TTL. NULL = none, and NULL again once the
-- lease ends (as lease_owner). No index: only retries look it up, through runs_live_leases.
ALTER TABLE runs ADD COLUMN lease_request_id text;
-- lease_runs gains p_request_ids: CREATE OR REPLACE cannot change its arguments, so the old one
-- goes and server/sql/lease_runs.sql (changed, so applied again) creates the new one.
DROP FUNCTION lease_runs(uuid[], integer[], text[], integer, bigint, bigint[], double precision);
