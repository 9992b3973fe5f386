-- 0007: three indexes that every lease and completion paid for and no statement of the
-- scheduler needs any more. A lease rewrote a run into six indexes and appended an event to
-- four; a completion wrote two and four. PostgreSQL alone (pgbench: a batch of 8 leases then
-- their 8 completions, one client) ran 281 batch pairs/s without them against 255 with them,
-- averaged over 11 alternating pairs (single runs vary by ±15% on the 2-core benchmark machine;
-- bench/scheduler/RESULTS.md, "Callback handlers and three fewer indexes").
--
-- events_by_sweep (sweep_id, event_id): watch streams read a sweep's events by commit order
-- through events_by_sweep_xid (0002); that index also serves a sweep's events in psql.
DROP INDEX events_by_sweep;
-- runs_unfinished_by_sweep (sweep_id) WHERE PENDING/LEASED/RUNNING: "is this sweep finished?"
-- now asks runs_pending_by_sweep and runs_live_by_sweep, as complete_runs_success (0006) does.
DROP INDEX runs_unfinished_by_sweep;
-- runs_live_by_owner (lease_owner) WHERE LEASED/RUNNING: only ListWorkers' count of active runs
-- read it; it now counts all live runs once per page (there are at most as many as busy
-- workers) through one of the two partial indexes of live runs.
DROP INDEX runs_live_by_owner;
