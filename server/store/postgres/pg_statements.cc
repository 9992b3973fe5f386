#include "server/store/postgres/pg_statements.h"

#include <pqxx/pqxx>
#include <string>

namespace parity::server::pg {

#define PARITY_US(col) "(extract(epoch FROM " col ") * 1000000)::bigint"
// The same, NULL for ±infinity (which no bigint holds).
#define PARITY_FINITE_US(col) "CASE WHEN isfinite(" col ") THEN " PARITY_US(col) " END"
// "Sweep s has no pending or live run", through the two partial indexes (runs_pending_by_sweep
// from its last ordinal down, past the dead entries of runs leased since the last vacuum at its
// front; runs_live_by_sweep), as complete_runs_success (server/sql/) asks it.
#define PARITY_NO_UNFINISHED_RUNS                                                              \
  "NOT EXISTS (SELECT 1 FROM (SELECT 1 FROM runs WHERE sweep_id = s.sweep_id AND state = "     \
  "'PENDING' ORDER BY ordinal DESC LIMIT 1) last_pending) AND NOT EXISTS (SELECT 1 FROM runs " \
  "WHERE sweep_id = s.sweep_id AND state IN ('LEASED', 'RUNNING'))"

const char* const kRunColumns =
    "r.run_id::text AS run_id, r.sweep_id::text AS sweep_id, r.spec_bytes, r.state, r.priority, "
    "r.attempt, r.max_attempts, r.preemptions, r.lease_owner::text AS lease_owner, r.lease_epoch, "
    PARITY_US("r.lease_expires_at") " AS lease_expires_us, r.device_indices::text AS devices, "
    "r.cancel_requested, r.checkpoint_step, r.checkpoint_uri, "
    PARITY_US("r.checkpoint_at") " AS checkpoint_us, r.failure_class, r.failure_code, "
    "r.failure_message, r.final_train_bpc, r.final_val_bpc, r.summary_tokens, r.summary_steps, "
    "r.measured_flops_per_token, r.wall_seconds, r.peak_memory_bytes, r.tokens_per_second, "
    "r.final_eval_bpc::text AS final_eval_bpc, r.dataset_digest, r.latest_step, r.latest_val_bpc, "
    PARITY_US("r.created_at") " AS created_us, "
    PARITY_US("r.started_at") " AS started_us, " PARITY_US("r.ended_at") " AS ended_us";

const char* const kSweepSelect =
    "SELECT s.sweep_id::text AS sweep_id, s.spec_bytes, s.state, s.owner, "
    "coalesce(s.idempotency_key, '') AS idempotency_key, s.created_at::text AS created_text, "
    PARITY_US("s.created_at") " AS created_us, " PARITY_US("s.ended_at") " AS ended_us, "
    "c.pending, c.leased, c.running, c.succeeded, c.failed, c.cancelled, c.total "
    "FROM sweeps s CROSS JOIN LATERAL ("
    "  SELECT count(*) FILTER (WHERE state = 'PENDING') AS pending,"
    "         count(*) FILTER (WHERE state = 'LEASED') AS leased,"
    "         count(*) FILTER (WHERE state = 'RUNNING') AS running,"
    "         count(*) FILTER (WHERE state = 'SUCCEEDED') AS succeeded,"
    "         count(*) FILTER (WHERE state = 'FAILED') AS failed,"
    "         count(*) FILTER (WHERE state = 'CANCELLED') AS cancelled,"
    "         count(*) AS total"
    "  FROM runs WHERE runs.sweep_id = s.sweep_id) c ";

namespace {

void PrepareSweeps(pqxx::connection& c) {
  const std::string sweep_select = kSweepSelect;
  // $1 key, $2 owner: keys are each owner's (migration 0013)
  c.prepare("sweep_by_key",
            "SELECT sweep_id::text, spec_bytes FROM sweeps WHERE owner = $2 AND "
            "idempotency_key = $1");
  // $1 name, $2 spec json, $3 spec bytes, $4 key (NULL = none), $5 owner, $6 priority
  c.prepare("insert_sweep",
            "INSERT INTO sweeps (sweep_id, name, spec_json, spec_bytes, idempotency_key, owner, "
            "priority) VALUES (gen_random_uuid(), $1, $2::jsonb, $3, $4, $5, $6) "
            "ON CONFLICT (owner, idempotency_key) DO NOTHING RETURNING sweep_id::text");
  c.prepare("insert_run",
            "INSERT INTO runs (run_id, sweep_id, ordinal, name, spec_json, spec_bytes, role, "
            "layout, params, active_params, activation_rate, flops_per_token, compute_flops, "
            "tokens, unique_tokens, epochs, d_model, num_layers, num_experts, top_k, "
            "expert_hidden, compute_budget, compute_multiple, data_variant, seed, "
            "predicted_efficiency_leverage, cpu_threads, gpus, memory_bytes, gpu_memory_bytes, "
            "priority, max_attempts) VALUES (gen_random_uuid(), $1, $2, $3, $4::jsonb, $5, $6, "
            "$7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22, $23, "
            "$24, $25, $26, $27, $28, $29, $30, $31) RETURNING run_id::text");
  // $1 sweep
  c.prepare("insert_creation_events",
            "INSERT INTO events (run_id, sweep_id, from_state, to_state, attempt, reason) "
            "SELECT run_id, sweep_id, NULL, 'PENDING', attempt, 'submitted' FROM runs "
            "WHERE sweep_id = $1");
  c.prepare("run_ids_of_sweep",
            "SELECT run_id::text FROM runs WHERE sweep_id = $1 ORDER BY ordinal");
  c.prepare("get_sweep", sweep_select + "WHERE s.sweep_id = $1");
  c.prepare("lock_sweep", "SELECT state FROM sweeps WHERE sweep_id = $1 FOR UPDATE");
  // $1 sweep. Its runs go with it (ON DELETE CASCADE), their events and metrics with them
  // (runs_deleted_with_records); only once it has ended: a live run's worker still writes.
  c.prepare("delete_ended_sweep",
            "WITH gone AS (DELETE FROM sweeps WHERE sweep_id = $1 AND ended_at IS NOT NULL "
            "RETURNING sweep_id) SELECT (SELECT count(*) FROM gone), (SELECT count(*) FROM runs r "
            "WHERE r.sweep_id = $1)");
  // $1 state ('' = all), $2 created_at text of the last row ('' = first page), $3 its id, $4 limit
  c.prepare("list_sweeps",
            sweep_select +
                "WHERE ($1 = '' OR s.state = $1) AND ($2 = '' OR (s.created_at, s.sweep_id) < "
                "($2::timestamptz, $3::uuid)) ORDER BY s.created_at DESC, s.sweep_id DESC "
                "LIMIT $4");
  c.prepare("mark_sweep_cancelled",
            "UPDATE sweeps SET state = 'CANCELLED' WHERE sweep_id = $1 AND state = 'ACTIVE'");
  // $1 sweep, $2 reason
  c.prepare("cancel_pending_runs",
            "WITH c AS (UPDATE runs SET state = 'CANCELLED', ended_at = now(), updated_at = now() "
            "  WHERE sweep_id = $1 AND state = 'PENDING' "
            "  RETURNING run_id, sweep_id, attempt, lease_epoch) "
            "INSERT INTO events (run_id, sweep_id, from_state, to_state, attempt, lease_epoch, "
            "reason) SELECT run_id, sweep_id, 'PENDING', 'CANCELLED', attempt, lease_epoch, $2 "
            "FROM c");
  c.prepare("flag_live_runs_cancelled",
            "UPDATE runs SET cancel_requested = true, updated_at = now() WHERE sweep_id = $1 "
            "AND state IN ('LEASED', 'RUNNING') AND NOT cancel_requested");
  // Ends a sweep once none of its runs is unfinished. Two runs ending at once may each see the
  // other still live and both skip it; finalize_sweeps (run by the reaper) catches that.
  c.prepare("refresh_sweep_state",
            "UPDATE sweeps s SET ended_at = now(), state = CASE WHEN s.state = 'CANCELLED' "
            "THEN 'CANCELLED' WHEN EXISTS (SELECT 1 FROM runs WHERE sweep_id = s.sweep_id AND "
            "state = 'FAILED') THEN 'FAILED' ELSE 'SUCCEEDED' END "
            "WHERE s.sweep_id = $1 AND s.ended_at IS NULL AND " PARITY_NO_UNFINISHED_RUNS);

  c.prepare("finalize_sweeps",
            "UPDATE sweeps s SET ended_at = now(), state = CASE WHEN s.state = 'CANCELLED' "
            "THEN 'CANCELLED' WHEN EXISTS (SELECT 1 FROM runs WHERE sweep_id = s.sweep_id AND "
            "state = 'FAILED') THEN 'FAILED' ELSE 'SUCCEEDED' END "
            "WHERE s.ended_at IS NULL AND " PARITY_NO_UNFINISHED_RUNS);
}

void PrepareRuns(pqxx::connection& c) {
  const std::string run_columns = kRunColumns;
  c.prepare("get_run", "SELECT " + run_columns + " FROM runs r WHERE r.run_id = $1");
  // $1 sweep, $2 states text[] ('{}' = all), $3 last ordinal, $4 limit
  c.prepare("list_runs", "SELECT " + run_columns +
                             ", r.ordinal FROM runs r WHERE r.sweep_id = $1 AND "
                             "(cardinality($2::text[]) = 0 OR r.state = ANY($2::text[])) AND "
                             "r.ordinal > $3 ORDER BY r.ordinal LIMIT $4");
  c.prepare("sweep_exists", "SELECT 1 FROM sweeps WHERE sweep_id = $1");
}

void PrepareWorkers(pqxx::connection& c) {
  // $1 id (NULL = new), $2 hostname, $3 devices json, $4 labels json, $5 version, $6 owner
  // (NULL = the scheduler's own process: claims nothing, may update any). An id owned by another
  // name is left as it is and returns no row.
  c.prepare("register_worker",
            "INSERT INTO workers (worker_id, hostname, devices, labels, version, owner, datasets) "
            "VALUES (coalesce($1::uuid, gen_random_uuid()), $2, $3::jsonb, $4::jsonb, $5, $6, "
            "$7::jsonb) ON CONFLICT (worker_id) DO UPDATE SET hostname = excluded.hostname, "
            "devices = excluded.devices, labels = excluded.labels, version = excluded.version, "
            "datasets = excluded.datasets, "
            "owner = coalesce(workers.owner, excluded.owner), last_seen_at = now() "
            "WHERE excluded.owner IS NULL OR workers.owner IS NULL OR workers.owner = "
            "excluded.owner RETURNING worker_id::text, " PARITY_US("last_seen_at"));
  // $1 id, $2 the claiming name (NULL = claim nothing): the owner after the claim, '' for none.
  c.prepare("claim_worker",
            "WITH claimed AS (UPDATE workers SET owner = $2 WHERE worker_id = $1 AND owner IS "
            "NULL AND $2::text IS NOT NULL RETURNING owner) SELECT coalesce((SELECT owner FROM "
            "claimed), w.owner, '') FROM workers w WHERE w.worker_id = $1");
  // $1 worker (NULL = none), $2 run ids (uuid[]): each existing run, in order, and whether the
  // worker holds it now or an event names it (events_by_run: a run's few events).
  c.prepare("run_holdings",
            "SELECT r.run_id::text, coalesce(r.lease_owner = $1::uuid OR EXISTS (SELECT 1 FROM "
            "events e WHERE e.run_id = r.run_id AND e.worker_id = $1::uuid), false) FROM "
            "unnest($2::uuid[]) WITH ORDINALITY AS q(run_id, i) JOIN runs r ON r.run_id = "
            "q.run_id ORDER BY q.i");
  // $1 seen within (seconds), $2 last_seen_at text of the last row ('' = first page), $3 its
  // id, $4 limit. Most recently seen first; active runs are the LEASED/RUNNING ones it owns.
  c.prepare("list_workers",
            "SELECT w.worker_id::text AS worker_id, w.hostname, w.devices::text AS devices, "
            "w.labels::text AS labels, w.version, w.datasets::text AS datasets, "
            PARITY_US("w.last_seen_at") " AS last_seen_us, "
            "w.last_seen_at::text AS last_seen_text, coalesce(a.n, 0) AS active_runs "
            "FROM workers w LEFT JOIN (SELECT lease_owner, count(*) AS n FROM runs WHERE state "
            "IN ('LEASED', 'RUNNING') GROUP BY lease_owner) a ON a.lease_owner = w.worker_id "
            "WHERE w.last_seen_at >= now() - make_interval(secs => $1) AND "
            "($2 = '' OR (w.last_seen_at, w.worker_id) < ($2::timestamptz, $3::uuid)) "
            "ORDER BY w.last_seen_at DESC, w.worker_id DESC LIMIT $4");
}

void PrepareLeasing(pqxx::connection& c) {
  const std::string run_columns = kRunColumns;
  // One statement, one round trip, its own transaction: lease_runs() (server/sql/) touches
  // the workers, ranks the open sweeps with pending work that fits (priority, then fewest live
  // runs — fair share — then oldest), shares the batch among them as leasing one run at a time
  // would, and takes each sweep's share in grid order (FOR UPDATE SKIP LOCKED) with new fencing
  // tokens, leases, the granted devices and events. $1 workers (uuid[]), $2 their CPU device
  // indices (integer[]), $3 their GPU indices in the order of $6 (text[] of integer[]
  // literals), $4 CPU threads offered, $5 host memory (0 = unknown), $6 free GPU memory largest
  // first (bigint[]; unknown = max), $7 ttl seconds. One row per leased request (request is
  // 1-based) and one with NULL run columns per unregistered worker.
  c.prepare("lease_runs",
            "SELECT l.request, " + run_columns +
                ", r.gpus FROM lease_runs($1::uuid[], $2::integer[], $3::text[], $4::integer, "
                "$5::bigint, $6::bigint[], $7::float8) l CROSS JOIN LATERAL (SELECT (l.run).*) r");
  c.prepare("lock_run",
            "SELECT run_id::text, sweep_id::text, state, lease_epoch, lease_owner::text, "
            "cancel_requested, attempt, max_attempts FROM runs WHERE run_id = $1 FOR UPDATE");
  // $1 run, $2 sweep, $3 from, $4 to, $5 attempt, $6 epoch, $7 worker (NULL), $8 reason
  c.prepare("insert_event",
            "INSERT INTO events (run_id, sweep_id, from_state, to_state, attempt, lease_epoch, "
            "worker_id, reason) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)");
  // $1 run, $2 ttl seconds, $3 step, $4 checkpoint step (NULL), $5 checkpoint uri (NULL),
  // $6 worker (its last_seen_at is refreshed too, so ListWorkers shows busy workers).
  c.prepare("heartbeat",
            "WITH seen AS (UPDATE workers SET last_seen_at = now() WHERE worker_id = $6) "
            "UPDATE runs SET state = 'RUNNING', lease_expires_at = now() + make_interval(secs => "
            "$2), started_at = coalesce(started_at, now()), latest_step = greatest(latest_step, "
            "$3), checkpoint_step = coalesce($4, checkpoint_step), checkpoint_uri = coalesce($5, "
            "checkpoint_uri), checkpoint_at = CASE WHEN $4::bigint IS NULL THEN checkpoint_at "
            "ELSE now() END, updated_at = now() WHERE run_id = $1 RETURNING " PARITY_US(
                "lease_expires_at"));
  c.prepare("cancel_run_now",
            "UPDATE runs SET state = 'CANCELLED', cancel_requested = false, lease_owner = NULL, "
            "lease_expires_at = NULL, ended_at = now(), updated_at = now() WHERE run_id = $1");
}

void PrepareMetrics(pqxx::connection& c) {
  // $1 run, $2 lease epoch, $3 steps strictly increasing, $4..$20 one array per column
  // (pg::MetricArrays, server/sql/): the count stored.
  c.prepare("append_metric_arrays",
            "SELECT append_metric_arrays($1::uuid, $2::bigint, $3::boolean, $4::bigint[], "
            "$5::integer[], $6::bigint[], $7::bigint[], $8::float8[], $9::float8[], "
            "$10::float8[], $11::float8[], $12::float8[], $13::float8[], $14::float8[], "
            "$15::float8[], $16::float8[], $17::float8[], $18::jsonb[], $19::jsonb[], "
            "$20::bigint[])");
  c.prepare("list_metrics",
            "SELECT step, attempt, tokens, unique_tokens, epoch, train_bpc, val_bpc, "
            "learning_rate, grad_norm, aux_loss, z_loss, tokens_per_second, flops_per_second, "
            "flops, expert_load::text AS expert_load, eval_bpc::text AS eval_bpc, " PARITY_US(
                "logged_at") " AS logged_us FROM metrics WHERE run_id = $1 AND step >= $2 "
                             "ORDER BY step LIMIT $3");
}

void PrepareCompletion(pqxx::connection& c) {
  const std::string run_columns = kRunColumns;
  // Successes in a batch (server/sql/): $1 runs (uuid[]), $2 lease epochs, $3..$10 train and
  // validation BPC, tokens, steps, measured M, wall seconds, peak memory, tokens/s, $11
  // checkpoint steps, $12 checkpoint uris, $13 final BPC per evaluation set (jsonb), $14
  // dataset digests (arrays, NULL = not reported). One row per request
  // (1-based) with its outcome (completed, unchanged, invalid, stale, not_found), why an invalid
  // summary disagrees with the plan, and the run as it ends up, in kRunColumns (NULL when not
  // found).
  c.prepare("complete_runs_success",
            "SELECT l.request, l.outcome, l.reason, " + run_columns +
                " FROM complete_runs_success($1::uuid[], $2::bigint[], $3::float8[], "
                "$4::float8[], $5::bigint[], $6::bigint[], $7::float8[], $8::float8[], "
                "$9::bigint[], $10::float8[], $11::bigint[], $12::text[], $13::jsonb[], "
                "$14::text[]) l "
                "CROSS JOIN LATERAL (SELECT (l.run).*) r");
  // $1 run, $2 next state, $3 next attempt, $4 delay seconds, $5 class, $6 code, $7 message,
  // $8 checkpoint step (NULL), $9 checkpoint uri (NULL), $10 preemptions
  c.prepare("complete_failure",
            "UPDATE runs SET state = $2, attempt = $3, preemptions = $10, not_before = now() + "
            "make_interval(secs "
            "=> $4), failure_class = $5, failure_code = $6, failure_message = $7, "
            "checkpoint_step = coalesce($8, checkpoint_step), checkpoint_uri = coalesce($9, "
            "checkpoint_uri), lease_owner = NULL, lease_expires_at = NULL, cancel_requested = "
            "false, ended_at = CASE WHEN $2 = 'PENDING' THEN NULL ELSE now() END, "
            "updated_at = now() WHERE run_id = $1");
}

void PrepareReaper(pqxx::connection& c) {
  // $1 limit, $2 the failure message of a lapse during an outage (kOutageLapseMessage).
  // Expired leases: PENDING with attempt + 1, or FAILED (LEASE_EXPIRED) past
  // max_attempts, or CANCELLED when cancellation was pending; one event each. After an outage
  // (reaper_liveness, record_reaper_pass) nothing is reaped before reap_from, and a lease that
  // lapsed before charge_from goes back to PENDING at the same attempt (event "lease expired
  // during an outage").
  c.prepare("reap_expired",
            "WITH live AS (SELECT coalesce(max(charge_from), '-infinity') AS charge_from, "
            "  coalesce(max(reap_from), '-infinity') AS reap_from FROM reaper_liveness), "
            "expired AS (SELECT r.run_id, r.state AS old_state, r.lease_owner AS old_owner, "
            "  r.lease_expires_at < live.charge_from AS outage FROM runs r CROSS JOIN live "
            "  WHERE r.state IN ('LEASED', 'RUNNING') AND r.lease_expires_at < now() "
            "  AND now() >= live.reap_from "
            "  ORDER BY r.lease_expires_at LIMIT $1 FOR UPDATE OF r SKIP LOCKED), "
            "upd AS (UPDATE runs r SET "
            "  state = CASE WHEN r.cancel_requested THEN 'CANCELLED' WHEN NOT e.outage AND "
            "    r.attempt >= r.max_attempts THEN 'FAILED' ELSE 'PENDING' END, "
            "  attempt = CASE WHEN r.cancel_requested OR e.outage OR r.attempt >= r.max_attempts "
            "    THEN r.attempt ELSE r.attempt + 1 END, "
            "  failure_class = CASE WHEN r.cancel_requested THEN r.failure_class ELSE "
            "    'LEASE_EXPIRED' END, "
            "  failure_message = CASE WHEN r.cancel_requested THEN r.failure_message WHEN e.outage "
            "    THEN $2 ELSE 'lease expired without a heartbeat' END, "
            "  ended_at = CASE WHEN r.cancel_requested OR (NOT e.outage AND r.attempt >= "
            "    r.max_attempts) THEN now() ELSE NULL END, "
            "  cancel_requested = false, lease_owner = NULL, lease_expires_at = NULL, "
            "  updated_at = now() FROM expired e WHERE r.run_id = e.run_id "
            "  RETURNING r.run_id, r.sweep_id, r.state, r.attempt, r.lease_epoch, e.old_state, "
            "  e.old_owner, e.outage), "
            "ev AS (INSERT INTO events (run_id, sweep_id, from_state, to_state, attempt, "
            "  lease_epoch, worker_id, reason) SELECT run_id, sweep_id, old_state, state, "
            "  attempt, lease_epoch, old_owner, CASE WHEN outage AND state = 'PENDING' THEN "
            "  'lease expired during an outage' ELSE 'lease expired' END FROM upd) "
            "SELECT sweep_id::text, state, outage FROM upd");
  // $1 caller knows of an outage, $2 max silence s, $3 lease TTL s, $4 grace s
  // (RunQueue::RecordReaperPass; server/sql/record_reaper_pass.sql).
  c.prepare("record_reaper_pass",
            "SELECT outage, " PARITY_FINITE_US("up_since") " AS up_since_us, " PARITY_FINITE_US(
                "charge_from") " AS charge_from_us, " PARITY_FINITE_US("reap_from") " AS "
            "reap_from_us FROM record_reaper_pass($1::boolean, $2::float8, $3::float8, $4::float8)");
  // $1 metrics age s, $2 points kept per run, $3 events age s, $4 workers age s, $5 sweeps per
  // pass (TelemetryRetention; server/sql/apply_telemetry_retention.sql).
  c.prepare("apply_telemetry_retention",
            "SELECT * FROM apply_telemetry_retention($1::float8, $2::integer, $3::float8, "
            "$4::float8, $5::integer)");
}

// CountRunsByState.
void PrepareDashboards(pqxx::connection& c) {
  // $1 how many unfinished sweeps to count one by one (newest first). Every other sweep's runs
  // fall into the row with sweep_id ''. One grouped scan of runs.
  c.prepare("count_runs_by_state",
            "WITH shown AS (SELECT sweep_id, name FROM sweeps WHERE ended_at IS NULL "
            "  ORDER BY created_at DESC, sweep_id DESC LIMIT $1) "
            "SELECT coalesce(shown.sweep_id::text, '') AS sweep_id, coalesce(shown.name, '') AS "
            "sweep_name, r.state, count(*) AS runs FROM runs r LEFT JOIN shown ON "
            "shown.sweep_id = r.sweep_id GROUP BY 1, 2, 3");
  // $1 live-worker window (seconds). What lease_runs (server/sql/) could hand out now,
  // ignoring whether a worker's devices fit; and the workers seen within the window.
  c.prepare("count_queue_and_workers",
            "SELECT (SELECT count(*) FROM runs r JOIN sweeps s ON s.sweep_id = r.sweep_id "
            "  WHERE r.state = 'PENDING' AND r.not_before <= now() AND s.ended_at IS NULL) "
            "  AS ready, (SELECT count(*) FROM workers WHERE last_seen_at >= now() - "
            "  make_interval(secs => $1)) AS live_workers");
}

void PrepareEvents(pqxx::connection& c) {
  const std::string event_columns =
      "SELECT event_id, run_id::text, coalesce(from_state, '') AS from_state, to_state, "
      "attempt, reason, " PARITY_US("created_at") " AS created_us FROM events ";
  // $1 sweep, $2 previous horizon, $3 current horizon (xid8 as text).
  c.prepare("sweep_events", event_columns +
                                "WHERE sweep_id = $1 AND xid >= $2::text::xid8 AND xid < "
                                "$3::text::xid8 ORDER BY xid, event_id");
  c.prepare("event_horizon", "SELECT pg_snapshot_xmin(pg_current_snapshot())::text");
  c.prepare("run_events",
            event_columns + "WHERE run_id = $1 AND event_id > $2 ORDER BY event_id LIMIT $3");
}

}  // namespace

void PrepareStatements(pqxx::connection& c) {
  for (auto prepare :
       {&PrepareSweeps, &PrepareRuns, &PrepareWorkers, &PrepareLeasing, &PrepareMetrics,
        &PrepareCompletion, &PrepareReaper, &PrepareDashboards, &PrepareEvents}) {
    prepare(c);
  }
}

#undef PARITY_NO_UNFINISHED_RUNS
#undef PARITY_US
#undef PARITY_FINITE_US

}  // namespace parity::server::pg
