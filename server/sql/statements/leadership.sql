-- The upkeep leadership (postgres_leader_leases.cc) and the fence of a leader's writes
-- (postgres_fenced_upkeep.cc). The functions are server/sql/leader_*.sql.

-- name: leader_lease_acquire
-- unprepared: the leadership's own pool prepares nothing. $1 name, $2 leader id, $3 TTL
-- (seconds): one election attempt, taking or renewing the lease.
SELECT holder, term, (extract(epoch FROM expires) * 1000000)::bigint AS expires_us, remaining
FROM leader_lease_acquire($1, $2, $3)

-- name: leader_lease_resign
-- unprepared: $1 name, $2 leader id, $3 epoch: ends that term now, if it is still the one held.
SELECT leader_lease_resign($1, $2, $3)

-- name: leader_lease_current
-- unprepared: $1 name: who holds the lease now ('' when it has expired), its term and expiry.
SELECT CASE WHEN expires_at > now() THEN leader_id ELSE '' END AS holder, epoch AS term,
       (extract(epoch FROM expires_at) * 1000000)::bigint AS expires_us,
       greatest(extract(epoch FROM expires_at - now()), 0)::float8 AS remaining
FROM leader_leases WHERE name = $1

-- name: leader_fence_holds
-- $1 name, $2 epoch: whether that term still holds, its row locked FOR SHARE to the commit;
-- the last statement of every fenced upkeep transaction (pg::WithTransaction).
SELECT leader_fence_holds($1, $2)
