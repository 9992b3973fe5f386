-- 0012: who may call the scheduler (server/api/access_control.h).
-- Bearer tokens: only the SHA-256 of each secret is kept, so a copy of the database grants
-- nothing. The name is the identity a token acts as (the owner of what it submits); several
-- tokens may share one (rotation).
CREATE TABLE access_tokens (
  token_id      uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  name          text NOT NULL CHECK (name ~ '^[A-Za-z0-9._@-]{1,64}$'),
  role          text NOT NULL CHECK (role IN ('viewer', 'researcher', 'worker', 'admin')),
  secret_sha256 bytea NOT NULL UNIQUE CHECK (length(secret_sha256) = 32),
  created_by    text NOT NULL,
  created_at    timestamptz NOT NULL DEFAULT now(),
  expires_at    timestamptz,
  revoked_at    timestamptz
);
CREATE INDEX access_tokens_by_name ON access_tokens (name) WHERE revoked_at IS NULL;
-- Keys the scheduler signs with (the lease secrets' HMAC key), made once by the first scheduler
-- to start and shared by every replica and restart, so that leases outlive a restart.
CREATE TABLE server_keys (
  name       text PRIMARY KEY,
  key        bytea NOT NULL CHECK (length(key) >= 32),
  created_at timestamptz NOT NULL DEFAULT now()
);
-- An identity's open sweeps, counted at each submission for its limits.
CREATE INDEX sweeps_active_by_owner ON sweeps (owner) WHERE state = 'ACTIVE';
