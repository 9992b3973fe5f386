-- GangQueue's statements (postgres_gang_queue.cc): the pool of waiting workers, whole-gang
-- placements, the rendezvous, follower heartbeats, lapsed gangs, restarts and counts. The
-- tables are migration 0021's; where a rank goes is decided in C++ (PlaceGang,
-- server/store/gang_placement.h), the same function the memory store calls.

-- name: gang_worker_exists
SELECT 1 FROM workers WHERE worker_id = $1::uuid

-- name: gang_pool_join
-- $1 worker, $2 CPU threads, $3 host memory (0 = unknown), $4 CPU device, $5 free GPU indices
-- largest free memory first (integer[] literal), $6 their free memory (bigint[] literal), $7
-- seconds it stays a candidate. Takes the worker's pool row, locked to the commit: a placement
-- by another transaction skips it meanwhile (gang_pool's SKIP LOCKED).
INSERT INTO gang_waiting_workers AS w (worker_id, cpu_threads, host_memory_bytes, cpu_device,
                                       gpu_indices, gpu_memory_bytes, waiting_until)
VALUES ($1::uuid, $2, $3, $4, $5::integer[], $6::bigint[], now() + make_interval(secs => $7))
ON CONFLICT (worker_id) DO UPDATE SET cpu_threads = EXCLUDED.cpu_threads,
  host_memory_bytes = EXCLUDED.host_memory_bytes, cpu_device = EXCLUDED.cpu_device,
  gpu_indices = EXCLUDED.gpu_indices, gpu_memory_bytes = EXCLUDED.gpu_memory_bytes,
  waiting_until = EXCLUDED.waiting_until

-- name: gang_pool_leave
-- $1 worker: out of the pool.
DELETE FROM gang_waiting_workers WHERE worker_id = $1::uuid

-- name: gang_pool_leave_all
-- $1 workers (uuid[]): placed, out of the pool.
DELETE FROM gang_waiting_workers WHERE worker_id = ANY ($1::uuid[])

-- name: gang_undelivered_slots
-- $1 worker: its slots of a live gang under the gang's current epoch that its LeaseRun has not
-- yet been answered with, locked; every row is one gang (a placed worker leaves the pool).
SELECT s.run_id::text AS run_id, s.rank, s.device_indices::text AS devices, s.lease_epoch
FROM gang_slots s JOIN runs r ON r.run_id = s.run_id AND r.lease_epoch = s.lease_epoch
WHERE s.worker_id = $1::uuid AND NOT s.delivered AND r.state IN ('LEASED', 'RUNNING')
ORDER BY s.run_id, s.rank FOR UPDATE OF s

-- name: gang_mark_delivered
-- $1 run, $2 worker, $3 epoch, $4 the LeaseRun attempt's request id ('' = none).
UPDATE gang_slots SET delivered = true, delivered_request_id = nullif($4, '')
WHERE run_id = $1::uuid AND worker_id = $2::uuid AND lease_epoch = $3

-- name: gang_slots_answered_to
-- $1 worker, $2 request id: its slots of a live gang under the gang's current epoch delivered to
-- that LeaseRun attempt, locked — none if any slot of the worker in that gang checked in (it
-- started ranks: the answer was not lost) or the rendezvous deadline passed. One gang at most.
SELECT s.run_id::text AS run_id, s.rank, s.device_indices::text AS devices, s.lease_epoch
FROM gang_slots s JOIN runs r ON r.run_id = s.run_id AND r.lease_epoch = s.lease_epoch
  JOIN gang_rendezvous g ON g.run_id = s.run_id AND g.deadline > now()
WHERE s.worker_id = $1::uuid AND s.delivered AND s.delivered_request_id = $2
  AND r.state IN ('LEASED', 'RUNNING')
  AND NOT EXISTS (SELECT 1 FROM gang_slots c WHERE c.run_id = s.run_id
                    AND c.worker_id = s.worker_id AND c.checked_in_at IS NOT NULL)
ORDER BY s.run_id, s.rank FOR UPDATE OF s

-- name: gang_renew_answered
-- $1 run, $2 worker, $3 epoch, $4 ttl seconds: the worker's slots, and the run's lease if the
-- worker holds rank 0, renewed for a retry answered again (never shortened).
WITH slots AS (
  UPDATE gang_slots SET expires_at = greatest(expires_at, now() + make_interval(secs => $4))
  WHERE run_id = $1::uuid AND worker_id = $2::uuid AND lease_epoch = $3)
UPDATE runs SET lease_expires_at = greatest(lease_expires_at, now() + make_interval(secs => $4))
WHERE run_id = $1::uuid AND lease_owner = $2::uuid AND lease_epoch = $3

-- name: gang_rendezvous_of
-- $1 run: its world size and rendezvous deadline.
SELECT world_size, (extract(epoch FROM deadline) * 1000000)::bigint AS deadline_us
FROM gang_rendezvous WHERE run_id = $1::uuid

-- name: gang_pending
-- The pending gangs one try looks at, best first: priority desc, then eligible longest (created,
-- or its retry's not_before, the later), then id; with how long each has been eligible. Served
-- by runs_pending_gangs.
SELECT r.run_id::text AS run_id, r.spec_bytes,
       (extract(epoch FROM now() - greatest(r.created_at, r.not_before)) * 1000000)::bigint
         AS waited_us
FROM runs r JOIN sweeps s ON s.sweep_id = r.sweep_id
WHERE r.state = 'PENDING' AND r.ranks > 1 AND r.not_before <= now() AND s.ended_at IS NULL
ORDER BY r.priority DESC, greatest(r.created_at, r.not_before), r.run_id LIMIT 16

-- name: gang_pool
-- The candidates: the pool's workers still waiting, locked, with the dataset copies they
-- registered (a pinned gang goes only to holders); one another transaction holds (it is being
-- placed, or answered) is skipped.
SELECT g.worker_id::text AS worker_id, g.cpu_threads, g.host_memory_bytes, g.cpu_device,
       g.gpu_indices::text AS gpu_indices, g.gpu_memory_bytes::text AS gpu_memory,
       coalesce((SELECT w.datasets::text FROM workers w WHERE w.worker_id = g.worker_id),
                '[]') AS datasets
FROM gang_waiting_workers g WHERE g.waiting_until > now() ORDER BY g.worker_id
FOR UPDATE OF g SKIP LOCKED

-- name: gang_lock_pending
-- $1 run: locked if it is still pending (another placement may hold it: skipped).
SELECT 1 FROM runs WHERE run_id = $1::uuid AND state = 'PENDING' FOR UPDATE SKIP LOCKED

-- name: gang_lease
-- $1 run, $2 rank 0's worker, $3 rank 0's devices (integer[] literal), $4 ttl seconds: the run
-- LEASED to the gang under epoch + 1, the gang epoch; its lease is rank 0's.
UPDATE runs SET state = 'LEASED', lease_owner = $2::uuid, lease_request_id = NULL,
  lease_epoch = lease_epoch + 1, lease_expires_at = now() + make_interval(secs => $4),
  cancel_requested = false, updated_at = now(), device_indices = $3::integer[]
WHERE run_id = $1::uuid RETURNING sweep_id::text AS sweep_id, lease_epoch, attempt

-- name: gang_clear
-- $1 run: its slots and rendezvous of any earlier epoch.
WITH slots AS (DELETE FROM gang_slots WHERE run_id = $1::uuid)
DELETE FROM gang_rendezvous WHERE run_id = $1::uuid

-- name: gang_insert_slots
-- $1 run, $2 epoch, $3 ranks (integer[]), $4 their workers (uuid[]), $5 their devices (text[]
-- of integer[] literals), $6 ttl seconds; $7 rendezvous timeout seconds.
WITH rendezvous AS (
  INSERT INTO gang_rendezvous (run_id, lease_epoch, world_size, placed_at, deadline)
  VALUES ($1::uuid, $2, cardinality($3::integer[]), now(), now() + make_interval(secs => $7)))
INSERT INTO gang_slots (run_id, rank, lease_epoch, worker_id, device_indices, expires_at)
SELECT $1::uuid, s.rank, $2, s.worker_id, s.devices::integer[], now() + make_interval(secs => $6)
FROM unnest($3::integer[], $4::uuid[], $5::text[]) AS s(rank, worker_id, devices)

-- name: gang_live_fleet
-- Workers seen within a minute and their registered devices (proto JSON): whether the fleet
-- could ever host a starving gang.
SELECT worker_id::text AS worker_id, devices::text AS devices, datasets::text AS datasets
FROM workers WHERE last_seen_at > now() - interval '1 minute'

-- name: gang_lock_rendezvous
-- $1 run: its rendezvous row, locked.
SELECT lease_epoch, world_size, address, released_at IS NOT NULL AS released,
       (extract(epoch FROM deadline) * 1000000)::bigint AS deadline_us,
       (extract(epoch FROM placed_at) * 1000000)::bigint AS placed_us
FROM gang_rendezvous WHERE run_id = $1::uuid FOR UPDATE

-- name: gang_slot_holder
-- $1 run, $2 rank, $3 epoch: the worker holding that rank.
SELECT worker_id::text FROM gang_slots WHERE run_id = $1::uuid AND rank = $2 AND lease_epoch = $3

-- name: gang_check_in
-- $1 run, $2 rank: checked in (the first time counts).
UPDATE gang_slots SET checked_in_at = coalesce(checked_in_at, now())
WHERE run_id = $1::uuid AND rank = $2

-- name: gang_post_address
-- $1 run, $2 address.
UPDATE gang_rendezvous SET address = $2 WHERE run_id = $1::uuid

-- name: gang_checked_in
-- $1 run, $2 epoch: ranks checked in.
SELECT count(*) FILTER (WHERE checked_in_at IS NOT NULL) FROM gang_slots
WHERE run_id = $1::uuid AND lease_epoch = $2

-- name: gang_release
-- $1 run: released (once).
UPDATE gang_rendezvous SET released_at = coalesce(released_at, now()) WHERE run_id = $1::uuid

-- name: gang_heartbeat_slots
-- $1 run, $2 worker, $3 epoch, $4 ttl seconds: the worker's slots renewed (no row: it holds
-- none); its last_seen_at with them.
WITH seen AS (UPDATE workers SET last_seen_at = now() WHERE worker_id = $2::uuid)
UPDATE gang_slots SET expires_at = now() + make_interval(secs => $4)
WHERE run_id = $1::uuid AND worker_id = $2::uuid AND lease_epoch = $3
RETURNING (extract(epoch FROM expires_at) * 1000000)::bigint

-- name: gang_lapsed
-- $1 limit. Live gangs past their rendezvous deadline unreleased (with the ranks that never
-- checked in), or else with a follower's slot lapsed (with those ranks; rank 0's worker's slots
-- ride the run's own lease, which the reaper watches).
SELECT r.run_id::text AS run_id, r.lease_epoch, r.attempt, r.max_attempts, r.preemptions,
       t.timed_out,
       array(SELECT s.rank FROM gang_slots s WHERE s.run_id = r.run_id
               AND s.lease_epoch = r.lease_epoch AND CASE WHEN t.timed_out
                 THEN s.checked_in_at IS NULL
                 ELSE s.worker_id <> r.lease_owner AND s.expires_at < now() END
             ORDER BY s.rank)::text AS ranks
FROM gang_rendezvous g JOIN runs r ON r.run_id = g.run_id AND r.lease_epoch = g.lease_epoch
CROSS JOIN LATERAL (SELECT g.released_at IS NULL AND g.deadline < now() AS timed_out) t
WHERE r.state IN ('LEASED', 'RUNNING') AND (t.timed_out OR EXISTS (
  SELECT 1 FROM gang_slots s WHERE s.run_id = r.run_id AND s.lease_epoch = r.lease_epoch
    AND s.worker_id <> r.lease_owner AND s.expires_at < now()))
ORDER BY g.deadline LIMIT $1

-- name: gang_bump_epoch
-- $1 run: a restart's new epoch (every rank's writes under the old one are refused), devices
-- freed; its slots and rendezvous go.
WITH slots AS (DELETE FROM gang_slots WHERE run_id = $1::uuid),
     rendezvous AS (DELETE FROM gang_rendezvous WHERE run_id = $1::uuid)
UPDATE runs SET lease_epoch = lease_epoch + 1, device_indices = '{}' WHERE run_id = $1::uuid

-- name: gang_counts
-- Pending gangs eligible now, live gangs, workers in the pool, slots of live gangs not yet
-- collected.
SELECT (SELECT count(*) FROM runs WHERE state = 'PENDING' AND ranks > 1 AND not_before <= now()),
       (SELECT count(*) FROM runs WHERE state IN ('LEASED', 'RUNNING') AND ranks > 1),
       (SELECT count(*) FROM gang_waiting_workers WHERE waiting_until > now()),
       (SELECT count(*) FROM gang_slots s JOIN runs r ON r.run_id = s.run_id
          AND r.lease_epoch = s.lease_epoch WHERE NOT s.delivered
          AND r.state IN ('LEASED', 'RUNNING'))
