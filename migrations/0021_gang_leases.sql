-- 0021: one run on many workers (issue #27). A run with resources.ranks > 1 is a gang: placed
-- whole over waiting workers in one transaction (GangQueue, server/store/gang_queue.h), one slot
-- per rank, one epoch (runs.lease_epoch) for every rank, rank 0's address released once every
-- rank checked in. The ordinary lease (lease_runs) takes runs of one rank only.
-- runs.ranks: the world size; 1 = not a gang (existing runs).
ALTER TABLE runs ADD COLUMN ranks integer NOT NULL DEFAULT 1;
-- The free devices of the workers whose LeaseRun long poll is parked now: a gang's candidates.
-- A row is a candidate until waiting_until (its call's next re-check, refreshed at each); a
-- placement removes its workers' rows, a call's last try its own.
CREATE TABLE gang_waiting_workers (
  worker_id uuid PRIMARY KEY REFERENCES workers (worker_id) ON DELETE CASCADE,
  cpu_threads integer NOT NULL,
  host_memory_bytes bigint NOT NULL,
  cpu_device integer NOT NULL,
  gpu_indices integer[] NOT NULL,      -- free GPUs, largest free memory first
  gpu_memory_bytes bigint[] NOT NULL,  -- their free memory, in the same order (0 = unknown)
  waiting_until timestamptz NOT NULL
);
-- One row per rank of a placed gang, under the epoch it was placed with (rows of an older epoch
-- are dead and go at the next placement). expires_at: the rank's worker must heartbeat before
-- (rank 0's worker's slots ride the run's own lease_expires_at instead).
CREATE TABLE gang_slots (
  run_id uuid NOT NULL REFERENCES runs (run_id) ON DELETE CASCADE,
  rank integer NOT NULL,
  lease_epoch bigint NOT NULL,
  worker_id uuid NOT NULL,
  device_indices integer[] NOT NULL,
  delivered boolean NOT NULL DEFAULT false,  -- its worker's LeaseRun got it
  checked_in_at timestamptz,                 -- its rendezvous check-in under lease_epoch
  expires_at timestamptz NOT NULL,
  PRIMARY KEY (run_id, rank)
);
CREATE INDEX gang_slots_by_worker ON gang_slots (worker_id) WHERE NOT delivered;
-- A placed gang's rendezvous: rank 0's address once posted, and the deadline for every rank to
-- check in. One row per gang run, rewritten at each placement.
CREATE TABLE gang_rendezvous (
  run_id uuid PRIMARY KEY REFERENCES runs (run_id) ON DELETE CASCADE,
  lease_epoch bigint NOT NULL,
  world_size integer NOT NULL,
  address text,
  placed_at timestamptz NOT NULL,
  deadline timestamptz NOT NULL,
  released_at timestamptz
);
-- Pending gangs, found without a walk of the queue (few at any time).
CREATE INDEX runs_pending_gangs ON runs (priority DESC, not_before) WHERE state = 'PENDING'
  AND ranks > 1;
