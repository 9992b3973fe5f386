-- leader_lease_resign: p_leader ends its term p_epoch of p_name now (PostgresLeaderLeases::
-- Resign, at a replica's shutdown). The row stays with its epoch (terms only rise) and expires
-- now; NOTIFY parity_leadership (payload: the name) wakes the other candidates, which take over
-- at once instead of at their next attempt. Returns whether p_leader held that term.
CREATE OR REPLACE FUNCTION leader_lease_resign(p_name text, p_leader text, p_epoch bigint)
RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
  UPDATE leader_leases SET leader_id = '', expires_at = now()
  WHERE name = p_name AND leader_id = p_leader AND epoch = p_epoch AND expires_at > now();
  IF NOT FOUND THEN
    RETURN false;
  END IF;
  PERFORM pg_notify('parity_leadership', p_name);
  RETURN true;
END $$;
