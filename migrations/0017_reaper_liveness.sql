-- 0017: outages are not the runs' fault (issue #25).
-- The reaper's own liveness, one row renewed by every reaper pass of any replica
-- (record_reaper_pass, server/sql/): a silence longer than the pass's limit, a scheduler that
-- just started, or a pass that failed (the database was away) proves an outage. After one, no
-- lease is reaped before reap_from (the holders' time to reconnect and heartbeat), and a lease
-- that lapses before charge_from (its holder never renewed it after the outage) is requeued
-- without spending an attempt.
CREATE TABLE reaper_liveness (
  singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),
  last_pass_at timestamptz NOT NULL,
  -- The start of the current stretch of continuous service ('-infinity': no outage recorded).
  up_since timestamptz NOT NULL,
  charge_from timestamptz NOT NULL,
  reap_from timestamptz NOT NULL
);
