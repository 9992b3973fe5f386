-- One reaper pass's record of the service's liveness (RunQueue::RecordReaperPass, migration
-- 0017): renews reaper_liveness and says whether an outage lies behind this pass. An outage is
-- p_outage (the caller knows of one: it just started, or its last pass failed) or a silence of
-- more than p_max_silence_s since the last pass any replica recorded. After one, up_since is now,
-- nothing is reaped for p_grace_s, and leases that lapse before now + p_lease_ttl_s (those no
-- heartbeat renewed after the outage) are requeued without charge; a later outage never shortens
-- an earlier one's windows. The first pass ever records no outage unless told.
CREATE OR REPLACE FUNCTION record_reaper_pass(p_outage boolean, p_max_silence_s float8,
                                              p_lease_ttl_s float8, p_grace_s float8)
RETURNS TABLE (outage boolean, up_since timestamptz, charge_from timestamptz,
               reap_from timestamptz)
LANGUAGE plpgsql AS $$
DECLARE
  v_last timestamptz;
  v_outage boolean;
BEGIN
  SELECT l.last_pass_at INTO v_last FROM reaper_liveness l WHERE l.singleton FOR UPDATE;
  v_outage := p_outage OR (v_last IS NOT NULL
                           AND now() - v_last > make_interval(secs => p_max_silence_s));
  INSERT INTO reaper_liveness AS l (singleton, last_pass_at, up_since, charge_from, reap_from)
  VALUES (true, now(), '-infinity', '-infinity', '-infinity')
  ON CONFLICT (singleton) DO UPDATE SET last_pass_at = now();
  IF v_outage THEN
    UPDATE reaper_liveness l SET
      up_since = now(),
      charge_from = greatest(l.charge_from, now() + make_interval(secs => p_lease_ttl_s)),
      reap_from = greatest(l.reap_from, now() + make_interval(secs => p_grace_s))
    WHERE l.singleton;
  END IF;
  RETURN QUERY SELECT v_outage, l.up_since, l.charge_from, l.reap_from
    FROM reaper_liveness l WHERE l.singleton;
END;
$$;
