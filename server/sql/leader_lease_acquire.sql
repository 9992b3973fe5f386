-- leader_lease_acquire: one election attempt (PostgresLeaderLeases::AcquireOrRenew; the
-- contract is LeaderLeases in server/store/leader_leases.h). Takes the leadership p_name for
-- p_leader when it is free or expired (a new term, epoch + 1), renews it when p_leader holds it
-- and it has not expired (same epoch), and leaves it alone otherwise. Answers the row as it is
-- after the attempt, with how long it has left by this database's clock (now()), so the
-- replicas' own clocks never meet. Concurrent attempts serialise on the row (ON CONFLICT waits
-- for the other's commit and then re-checks the condition), so one term has one holder.
CREATE OR REPLACE FUNCTION leader_lease_acquire(p_name text, p_leader text, p_ttl double precision)
RETURNS TABLE (holder text, term bigint, expires timestamptz, remaining double precision)
LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO leader_leases AS l (name, leader_id, epoch, elected_at, expires_at)
  VALUES (p_name, p_leader, 1, now(), now() + make_interval(secs => p_ttl))
  ON CONFLICT (name) DO UPDATE
    SET epoch = CASE WHEN l.leader_id = p_leader AND l.expires_at > now() THEN l.epoch
                     ELSE l.epoch + 1 END,
        elected_at = CASE WHEN l.leader_id = p_leader AND l.expires_at > now() THEN l.elected_at
                          ELSE now() END,
        leader_id = p_leader,
        expires_at = now() + make_interval(secs => p_ttl)
    WHERE l.expires_at <= now() OR l.leader_id = p_leader;
  RETURN QUERY
    SELECT CASE WHEN l.expires_at > now() THEN l.leader_id ELSE '' END, l.epoch, l.expires_at,
           greatest(extract(epoch FROM l.expires_at - now()), 0)::double precision
    FROM leader_leases l WHERE l.name = p_name;
END $$;
