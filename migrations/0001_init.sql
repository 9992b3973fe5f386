-- 0001: the scheduler's schema: sweeps, runs, workers, metrics, events and the results view.
-- Forward-only: never edit an applied migration; add 0002_*.sql instead. Applied in one
-- transaction by `parity-scheduler migrate` (and at start-up) under an advisory lock.
-- States and classes are text (not integers) so that psql queries read plainly.

CREATE TABLE sweeps (
  sweep_id        uuid PRIMARY KEY,
  name            text NOT NULL,
  -- The submitted SweepSpec twice: JSON for people and SQL, deterministic bytes for the API.
  spec_json       jsonb NOT NULL,
  spec_bytes      bytea NOT NULL,
  state           text NOT NULL DEFAULT 'ACTIVE'
                  CHECK (state IN ('ACTIVE', 'SUCCEEDED', 'FAILED', 'CANCELLED')),
  -- NULL = submitted without a key; several NULLs are allowed by UNIQUE.
  idempotency_key text UNIQUE,
  owner           text NOT NULL,
  priority        integer NOT NULL DEFAULT 0,
  created_at      timestamptz NOT NULL DEFAULT now(),
  ended_at        timestamptz
);
-- ListSweeps pages newest first with the keyset (created_at, sweep_id).
CREATE INDEX sweeps_created ON sweeps (created_at DESC, sweep_id DESC);

CREATE TABLE workers (
  worker_id     uuid PRIMARY KEY,
  hostname      text NOT NULL,
  devices       jsonb NOT NULL,
  labels        jsonb NOT NULL DEFAULT '{}',
  version       text NOT NULL DEFAULT '',
  registered_at timestamptz NOT NULL DEFAULT now(),
  last_seen_at  timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE runs (
  run_id          uuid PRIMARY KEY,
  sweep_id        uuid NOT NULL REFERENCES sweeps (sweep_id) ON DELETE CASCADE,
  ordinal         integer NOT NULL,          -- position in grid order
  name            text NOT NULL,
  spec_json       jsonb NOT NULL,
  spec_bytes      bytea NOT NULL,            -- the RunSpec the worker trains
  -- Accounting as real columns (copied from RunSpec.accounting) so results are plain SQL.
  role            text NOT NULL,             -- 'MOE' | 'DENSE_BASELINE'
  layout          text NOT NULL,             -- 'dense' | '1dense+SE' | 'all-moe' | 'interleaved'
  params          bigint NOT NULL,           -- N
  active_params   bigint NOT NULL,           -- N_a
  activation_rate double precision NOT NULL, -- r_a
  flops_per_token double precision NOT NULL, -- M (planned, training FLOPs/token)
  compute_flops   double precision NOT NULL, -- C
  tokens          bigint NOT NULL,           -- D
  unique_tokens   bigint NOT NULL,           -- D̂
  epochs          double precision NOT NULL, -- D/D̂
  d_model         integer NOT NULL,
  num_layers      integer NOT NULL,
  num_experts     integer NOT NULL,          -- E (0 dense)
  top_k           integer NOT NULL,          -- K (0 dense)
  expert_hidden   integer NOT NULL,          -- D_e (0 dense)
  compute_budget  text NOT NULL,
  compute_multiple double precision NOT NULL,
  data_variant    text NOT NULL,
  seed            bigint NOT NULL,
  predicted_efficiency_leverage double precision NOT NULL DEFAULT 0,
  -- Resources a worker must offer.
  cpu_threads     integer NOT NULL DEFAULT 1,
  gpus            integer NOT NULL DEFAULT 0,
  memory_bytes    bigint NOT NULL DEFAULT 0,
  gpu_memory_bytes bigint NOT NULL DEFAULT 0,
  -- Lifecycle.
  state           text NOT NULL DEFAULT 'PENDING'
                  CHECK (state IN ('PENDING', 'LEASED', 'RUNNING', 'SUCCEEDED', 'FAILED',
                                   'CANCELLED')),
  priority        integer NOT NULL DEFAULT 0,
  attempt         integer NOT NULL DEFAULT 1,  -- the attempt the current/next lease runs
  max_attempts    integer NOT NULL DEFAULT 3,
  not_before      timestamptz NOT NULL DEFAULT '-infinity',  -- retry delay
  -- Lease: lease_epoch is the fencing token, +1 on every lease, never reset.
  lease_owner     uuid,
  lease_epoch     bigint NOT NULL DEFAULT 0,
  lease_expires_at timestamptz,
  device_indices  integer[] NOT NULL DEFAULT '{}',
  cancel_requested boolean NOT NULL DEFAULT false,
  checkpoint_step bigint,
  checkpoint_uri  text,
  checkpoint_at   timestamptz,
  -- Failure of the run (or of its last failed attempt).
  failure_class   text CHECK (failure_class IN ('PREEMPTED', 'INFRASTRUCTURE', 'OUT_OF_MEMORY',
                                                'USER_ERROR', 'LEASE_EXPIRED')),
  failure_code    integer,
  failure_message text,
  -- Summary (SUCCEEDED).
  final_train_bpc double precision,
  final_val_bpc   double precision,
  summary_tokens  bigint,
  summary_steps   bigint,
  measured_flops_per_token double precision,
  wall_seconds    double precision,
  peak_memory_bytes bigint,
  tokens_per_second double precision,
  -- Progress.
  latest_step     bigint NOT NULL DEFAULT 0,
  latest_val_bpc  double precision,
  created_at      timestamptz NOT NULL DEFAULT now(),
  started_at      timestamptz,
  ended_at        timestamptz,
  updated_at      timestamptz NOT NULL DEFAULT now(),
  UNIQUE (sweep_id, ordinal)
);
-- Leasing takes the first pending run of the chosen sweep in grid order; fair share counts live
-- runs per sweep; the reaper walks live leases by expiry; a sweep ends when none is unfinished.
CREATE INDEX runs_pending_by_sweep ON runs (sweep_id, ordinal) WHERE state = 'PENDING';
CREATE INDEX runs_live_by_sweep ON runs (sweep_id) WHERE state IN ('LEASED', 'RUNNING');
CREATE INDEX runs_live_leases ON runs (lease_expires_at) WHERE state IN ('LEASED', 'RUNNING');
CREATE INDEX runs_unfinished_by_sweep ON runs (sweep_id)
  WHERE state IN ('PENDING', 'LEASED', 'RUNNING');
-- Sweeps that may still have work.
CREATE INDEX sweeps_open ON sweeps (priority DESC, created_at) WHERE ended_at IS NULL;

-- Every state change of a run, appended in the transaction that made it.
CREATE TABLE events (
  event_id   bigserial PRIMARY KEY,
  run_id     uuid NOT NULL REFERENCES runs (run_id) ON DELETE CASCADE,
  sweep_id   uuid NOT NULL,
  from_state text,          -- NULL for the creation event
  to_state   text NOT NULL,
  attempt    integer NOT NULL,
  lease_epoch bigint NOT NULL DEFAULT 0,
  worker_id  uuid,
  reason     text NOT NULL DEFAULT '',
  created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX events_by_sweep ON events (sweep_id, event_id);
CREATE INDEX events_by_run ON events (run_id, event_id);

-- Telemetry, one row per (run, logging step); built for ~100M rows: 16 hash partitions by run so
-- that a run's curve lives in one partition and its primary key index stays small. The primary
-- key makes ingestion idempotent (INSERT ... ON CONFLICT DO NOTHING).
CREATE TABLE metrics (
  run_id            uuid NOT NULL,
  step              bigint NOT NULL,
  attempt           integer NOT NULL,
  tokens            bigint NOT NULL,
  unique_tokens     bigint NOT NULL,
  epoch             double precision NOT NULL,
  train_bpc         double precision NOT NULL,
  val_bpc           double precision,          -- NULL except at evaluation steps
  learning_rate     double precision NOT NULL,
  grad_norm         double precision NOT NULL,
  aux_loss          double precision NOT NULL,
  z_loss            double precision NOT NULL,
  tokens_per_second double precision NOT NULL,
  flops_per_second  double precision NOT NULL,
  flops             double precision NOT NULL,
  expert_load       jsonb,                     -- [ExpertLoadStats as JSON], NULL for dense
  logged_at         timestamptz,
  received_at       timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (run_id, step)
) PARTITION BY HASH (run_id);
CREATE TABLE metrics_p00 PARTITION OF metrics FOR VALUES WITH (MODULUS 16, REMAINDER 0);
CREATE TABLE metrics_p01 PARTITION OF metrics FOR VALUES WITH (MODULUS 16, REMAINDER 1);
CREATE TABLE metrics_p02 PARTITION OF metrics FOR VALUES WITH (MODULUS 16, REMAINDER 2);
CREATE TABLE metrics_p03 PARTITION OF metrics FOR VALUES WITH (MODULUS 16, REMAINDER 3);
CREATE TABLE metrics_p04 PARTITION OF metrics FOR VALUES WITH (MODULUS 16, REMAINDER 4);
CREATE TABLE metrics_p05 PARTITION OF metrics FOR VALUES WITH (MODULUS 16, REMAINDER 5);
CREATE TABLE metrics_p06 PARTITION OF metrics FOR VALUES WITH (MODULUS 16, REMAINDER 6);
CREATE TABLE metrics_p07 PARTITION OF metrics FOR VALUES WITH (MODULUS 16, REMAINDER 7);
CREATE TABLE metrics_p08 PARTITION OF metrics FOR VALUES WITH (MODULUS 16, REMAINDER 8);
CREATE TABLE metrics_p09 PARTITION OF metrics FOR VALUES WITH (MODULUS 16, REMAINDER 9);
CREATE TABLE metrics_p10 PARTITION OF metrics FOR VALUES WITH (MODULUS 16, REMAINDER 10);
CREATE TABLE metrics_p11 PARTITION OF metrics FOR VALUES WITH (MODULUS 16, REMAINDER 11);
CREATE TABLE metrics_p12 PARTITION OF metrics FOR VALUES WITH (MODULUS 16, REMAINDER 12);
CREATE TABLE metrics_p13 PARTITION OF metrics FOR VALUES WITH (MODULUS 16, REMAINDER 13);
CREATE TABLE metrics_p14 PARTITION OF metrics FOR VALUES WITH (MODULUS 16, REMAINDER 14);
CREATE TABLE metrics_p15 PARTITION OF metrics FOR VALUES WITH (MODULUS 16, REMAINDER 15);

-- Wake idle long polls when a run becomes PENDING. The notification only wakes: the lease
-- transaction decides who gets the run. Statement-level with a transition table so a 300-run
-- submission sends one notification, and heartbeats (no PENDING rows) send none.
CREATE FUNCTION notify_runs_pending() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF EXISTS (SELECT 1 FROM changed_runs WHERE state = 'PENDING') THEN
    PERFORM pg_notify('parity_runs_pending', '');
  END IF;
  RETURN NULL;
END $$;
CREATE TRIGGER runs_pending_after_insert AFTER INSERT ON runs
  REFERENCING NEW TABLE AS changed_runs
  FOR EACH STATEMENT EXECUTE FUNCTION notify_runs_pending();
CREATE TRIGGER runs_pending_after_update AFTER UPDATE ON runs
  REFERENCING NEW TABLE AS changed_runs
  FOR EACH STATEMENT EXECUTE FUNCTION notify_runs_pending();

-- One row per run: accounting, planned vs measured FLOPs/token, final BPC and ΔBPC against the
-- 1C dense baseline of the same sweep, compute budget, data variant and seed (the first such
-- baseline in grid order that SUCCEEDED; NULL when there is none).
CREATE VIEW results AS
SELECT r.run_id, r.sweep_id, r.ordinal, r.name, r.role, r.layout, r.state,
       r.d_model, r.num_layers, r.num_experts, r.top_k, r.expert_hidden,
       r.params, r.active_params, r.activation_rate,
       r.flops_per_token AS planned_flops_per_token,
       r.measured_flops_per_token,
       r.measured_flops_per_token / NULLIF(r.flops_per_token, 0) AS measured_over_planned_flops,
       r.compute_flops, r.tokens, r.unique_tokens, r.epochs,
       r.compute_budget, r.compute_multiple, r.data_variant, r.seed,
       r.predicted_efficiency_leverage,
       r.final_train_bpc, r.final_val_bpc, r.wall_seconds, r.attempt,
       r.final_val_bpc - b.final_val_bpc AS delta_bpc_vs_dense
FROM runs r
LEFT JOIN LATERAL (
  SELECT d.final_val_bpc
  FROM runs d
  WHERE d.sweep_id = r.sweep_id AND d.role = 'DENSE_BASELINE' AND d.compute_multiple = 1
    AND d.compute_budget = r.compute_budget AND d.data_variant = r.data_variant
    AND d.seed = r.seed AND d.state = 'SUCCEEDED'
  ORDER BY d.ordinal
  LIMIT 1
) b ON true;
