-- leader_fence_holds: whether the term p_epoch of p_name still holds (a LeaderFence,
-- server/store/leader_leases.h). Every upkeep transaction of the leader (reaping, outage grace,
-- retention, sweep finalisation) calls it last, just before COMMIT, and rolls back on false. The
-- row is locked FOR SHARE until that commit, so a takeover (an UPDATE of the row) either
-- committed before the check, which then fails, or waits for the upkeep to commit: no write of
-- a deposed leader lands after its successor's term began. clock_timestamp(), not now(): a long
-- pass must not count on a lease that ran out while it worked.
CREATE OR REPLACE FUNCTION leader_fence_holds(p_name text, p_epoch bigint)
RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
  PERFORM 1 FROM leader_leases
  WHERE name = p_name AND epoch = p_epoch AND leader_id <> '' AND expires_at > clock_timestamp()
  FOR SHARE;
  RETURN FOUND;
END $$;
