-- 0018: several scheduler replicas, one leader for upkeep (issue #25).
-- One row per named leadership ("upkeep": the reaper, telemetry retention, sweep finalisation).
-- The holder renews it every TTL/3; a candidate takes it once expires_at has passed (a new term,
-- epoch + 1). Resigning keeps the row and its epoch, so terms only rise. The functions are in
-- server/sql/leader_lease_*.sql and leader_fence_holds.sql.
CREATE TABLE leader_leases (
  name        text PRIMARY KEY,
  leader_id   text NOT NULL,
  epoch       bigint NOT NULL CHECK (epoch > 0),
  elected_at  timestamptz NOT NULL,
  expires_at  timestamptz NOT NULL
);
