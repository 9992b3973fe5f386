-- AccessTokens' statements (access_tokens, server_keys: migration 0012;
-- postgres_access_tokens.cc). Not on the lease path: the API caches what FindToken returns
-- (server/api/access_control.h), so they run unprepared.

-- fragment: token_columns
token_id::text, name, role, created_by,
(extract(epoch FROM created_at) * 1000000)::bigint AS created_at_us,
(extract(epoch FROM expires_at) * 1000000)::bigint AS expires_at_us,
(extract(epoch FROM revoked_at) * 1000000)::bigint AS revoked_at_us

-- name: create_token
-- unprepared. $1 name, $2 role, $3 secret's SHA-256, $4 created by, $5 expiry (µs, NULL = never).
INSERT INTO access_tokens (name, role, secret_sha256, created_by, expires_at)
VALUES ($1, $2, $3, $4, to_timestamp($5::float8 / 1e6))
ON CONFLICT (secret_sha256) DO NOTHING RETURNING {{token_columns}}

-- name: find_token
-- unprepared. $1 secret's SHA-256.
SELECT {{token_columns}} FROM access_tokens WHERE secret_sha256 = $1

-- name: list_tokens
-- unprepared. $1 include revoked and expired ones, $2 created_at (µs) of the last row (NULL =
-- first page), $3 its id, $4 limit. Newest first.
SELECT {{token_columns}} FROM access_tokens
WHERE ($1 OR (revoked_at IS NULL AND (expires_at IS NULL OR expires_at > now())))
  AND ($2::bigint IS NULL
       OR ((extract(epoch FROM created_at) * 1000000)::bigint, token_id::text) < ($2::bigint, $3))
ORDER BY created_at DESC, token_id::text DESC LIMIT $4

-- name: revoke_tokens_by_name
-- unprepared. $1 name.
UPDATE access_tokens SET revoked_at = now() WHERE name = $1 AND revoked_at IS NULL RETURNING 1

-- name: revoke_token_by_id
-- unprepared. $1 token id.
UPDATE access_tokens SET revoked_at = now()
WHERE token_id = $1::uuid AND revoked_at IS NULL RETURNING 1

-- name: has_live_admin
-- unprepared.
SELECT 1 FROM access_tokens
WHERE role = 'admin' AND revoked_at IS NULL AND (expires_at IS NULL OR expires_at > now())
LIMIT 1

-- name: insert_server_key
-- unprepared. $1 name, $2 key: the first writer's key stays.
INSERT INTO server_keys (name, key) VALUES ($1, $2) ON CONFLICT DO NOTHING

-- name: server_key
-- unprepared. $1 name.
SELECT key FROM server_keys WHERE name = $1
