// PostgresRunStore's RunQueue: workers, heartbeats, metrics, failed completions and the reaper
// (leases and successes go in batches: postgres_run_queue_batches.cc).
// Every worker write locks the run row and checks the fencing token first; a mismatch returns
// FAILED_PRECONDITION (CheckLeaseEpoch, store_errors.h) before anything is written, and the
// transaction rolls back.
#include <algorithm>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>

#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "core/status_macros.h"
#include "server/store/postgres/pg_rows.h"
#include "server/store/postgres/pg_statements.h"
#include "server/store/postgres/pg_support.h"
#include "server/store/postgres/postgres_run_store.h"
#include "server/store/store_errors.h"
#include "server/store/uuid.h"

namespace parity::server {
namespace {

using pg::WithTransaction;

double Seconds(absl::Duration d) { return absl::ToDoubleSeconds(d); }

// The locked row of a run a worker writes about.
struct LockedRun {
  std::string sweep_id;
  v1::RunState state;
  int64_t lease_epoch;
  std::string lease_owner;
  bool cancel_requested;
  uint32_t attempt;
  uint32_t max_attempts;
};

absl::StatusOr<LockedRun> LockRun(pqxx::work& tx, const std::string& run_id) {
  const pqxx::result rows = tx.exec_prepared("lock_run", run_id);
  if (rows.empty()) return pg::NotFoundError("run", run_id);
  const pqxx::row& row = rows[0];
  return LockedRun{row[1].c_str(),       pg::RunStateFromText(row[2].c_str()),
                   row[3].as<int64_t>(), row[4].is_null() ? "" : row[4].c_str(),
                   row[5].as<bool>(),    row[6].as<uint32_t>(),
                   row[7].as<uint32_t>()};
}

bool IsLive(v1::RunState state) {
  return state == v1::RUN_STATE_LEASED || state == v1::RUN_STATE_RUNNING;
}

bool IsFinal(v1::RunState state) {
  return state == v1::RUN_STATE_SUCCEEDED || state == v1::RUN_STATE_FAILED ||
         state == v1::RUN_STATE_CANCELLED;
}

void InsertEvent(pqxx::work& tx, const std::string& run_id, const LockedRun& run, v1::RunState to,
                 uint32_t attempt, const std::string& reason) {
  tx.exec_prepared("insert_event", run_id, run.sweep_id, pg::RunStateText(run.state),
                   pg::RunStateText(to), attempt, run.lease_epoch,
                   run.lease_owner.empty() ? std::nullopt : std::optional(run.lease_owner), reason);
}

// Not locking the sweep row keeps completions of one sweep from queueing behind each other; the
// rare sweep whose last two runs end at once is finalized by the reaper's pass instead.
void EndSweepIfDone(pqxx::work& tx, const std::string& sweep_id) {
  tx.exec_prepared("refresh_sweep_state", sweep_id);
}

// The errors append_metric_arrays (server/sql/) raises: P0002 for an unknown run, PR002 for a
// stale epoch (its message is the current one: CheckLeaseEpoch words the refusal), PR001 for a
// lost lease or an ended run (its message says which). OK for any other error (rethrown).
absl::Status FencingError(const pqxx::sql_error& e, const std::string& run_id,
                          int64_t lease_epoch) {
  if (e.sqlstate() == "P0002") return pg::NotFoundError("run", run_id);
  int64_t current = 0;
  if (e.sqlstate() == "PR002" && absl::SimpleAtoi(pg::PrimaryMessage(e), &current)) {
    if (absl::Status stale = CheckLeaseEpoch(run_id, lease_epoch, current); !stale.ok()) {
      return stale;
    }
  }
  if (e.sqlstate() == "PR001") return pg::LeaseEpochError(run_id, pg::PrimaryMessage(e));
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<v1::Worker> PostgresRunStore::RegisterWorker(const WorkerRegistration& worker) {
  nlohmann::json devices = nlohmann::json::array();
  for (const v1::Device& device : worker.devices) {
    devices.push_back(nlohmann::json::parse(pg::JsonOf(device)));
  }
  nlohmann::json labels = nlohmann::json::object();
  for (const auto& [key, value] : worker.labels) labels[key] = value;
  nlohmann::json datasets = nlohmann::json::array();
  for (const v1::DatasetHolding& dataset : worker.datasets) {
    datasets.push_back(nlohmann::json::parse(pg::JsonOf(dataset)));
  }
  return WithTransaction(*pool_, [&](pqxx::work& tx) -> absl::StatusOr<v1::Worker> {
    const pqxx::result rows = tx.exec_prepared(
        "register_worker",
        worker.worker_id.empty() ? std::nullopt : std::optional(worker.worker_id), worker.hostname,
        devices.dump(), labels.dump(), worker.version,
        worker.owner.empty() ? std::nullopt : std::optional(worker.owner), datasets.dump());
    // No row: the id is another name's (the update's WHERE refused it), nothing changed.
    if (rows.empty()) return WorkerOfAnotherIdentityError(worker.worker_id, "register");
    v1::Worker result;
    result.set_worker_id(rows[0][0].c_str());
    result.set_hostname(worker.hostname);
    for (const v1::Device& device : worker.devices) *result.add_devices() = device;
    for (const auto& [key, value] : worker.labels) (*result.mutable_labels())[key] = value;
    result.set_version(worker.version);
    for (const v1::DatasetHolding& dataset : worker.datasets) *result.add_datasets() = dataset;
    *result.mutable_last_seen_time() = pg::TimestampFromMicros(rows[0][1].as<int64_t>());
    return result;
  });
}

absl::StatusOr<std::string> PostgresRunStore::ClaimWorker(const std::string& worker_id,
                                                          const std::string& owner) {
  if (!IsUuid(worker_id)) return pg::NotFoundError("worker", worker_id, "is not registered");
  return WithTransaction(*pool_, [&](pqxx::work& tx) -> absl::StatusOr<std::string> {
    const pqxx::result rows = tx.exec_prepared("claim_worker", worker_id,
                                               owner.empty() ? std::nullopt : std::optional(owner));
    if (rows.empty()) return pg::NotFoundError("worker", worker_id, "is not registered");
    return std::string(rows[0][0].c_str());
  });
}

absl::StatusOr<std::vector<RunHolding>> PostgresRunStore::RunHoldings(
    const std::string& worker_id, const std::vector<std::string>& run_ids) {
  pg::ArrayLiteral ids;
  for (const std::string& id : run_ids) {
    if (IsUuid(id)) ids.AddQuoted(id);  // anything else names no run
  }
  // A worker id that is no UUID never held anything; the runs still exist or not.
  const std::optional<std::string> worker =
      IsUuid(worker_id) ? std::optional(worker_id) : std::nullopt;
  return WithTransaction(*pool_, [&](pqxx::work& tx) -> absl::StatusOr<std::vector<RunHolding>> {
    std::vector<RunHolding> holdings;
    for (const pqxx::row& row : tx.exec_prepared("run_holdings", worker, ids.Take())) {
      holdings.push_back({row[0].c_str(), row[1].as<bool>()});
    }
    return holdings;
  });
}

absl::StatusOr<Page<v1::Worker>> PostgresRunStore::ListWorkers(const WorkersQuery& query) {
  std::string after_time, after_id;
  if (!query.page.page_token.empty()) {
    std::string text;
    if (!absl::WebSafeBase64Unescape(query.page.page_token, &text)) {
      return absl::InvalidArgumentError("page_token is not valid");
    }
    std::vector<std::string> parts = absl::StrSplit(text, '|');
    if (parts.size() != 2 || parts[0].empty() || parts[1].size() != 36) {
      return absl::InvalidArgumentError("page_token is not valid");
    }
    after_time = parts[0];
    after_id = parts[1];
  }
  return WithTransaction(*pool_, [&](pqxx::work& tx) -> absl::StatusOr<Page<v1::Worker>> {
    const pqxx::result rows =
        tx.exec_prepared("list_workers", Seconds(query.seen_within), after_time,
                         after_id.empty() ? std::nullopt : std::optional(after_id),
                         static_cast<int64_t>(query.page.page_size) + 1);
    Page<v1::Worker> result;
    for (pqxx::result::size_type i = 0; i < rows.size() && i < query.page.page_size; ++i) {
      result.items.push_back(pg::WorkerFromRow(rows[i]));
      if (i + 1 == query.page.page_size && rows.size() > query.page.page_size) {
        result.next_page_token = absl::WebSafeBase64Escape(
            absl::StrCat(rows[i]["last_seen_text"].c_str(), "|", rows[i]["worker_id"].c_str()));
      }
    }
    return result;
  });
}

absl::StatusOr<HeartbeatResult> PostgresRunStore::Heartbeat(const HeartbeatUpdate& update) {
  return WithTransaction(*pool_, [&](pqxx::work& tx) -> absl::StatusOr<HeartbeatResult> {
    PARITY_ASSIGN_OR_RETURN(const LockedRun run, LockRun(tx, update.run_id));
    PARITY_RETURN_IF_ERROR(CheckLeaseEpoch(update.run_id, update.lease_epoch, run.lease_epoch));
    // Cancelled at an earlier heartbeat of this same lease: say so again (idempotent).
    if (run.state == v1::RUN_STATE_CANCELLED) return HeartbeatResult{absl::Now(), true};
    if (!IsLive(run.state) || run.lease_owner != update.worker_id) {
      return pg::LeaseEpochError(update.run_id,
                                 "the lease was lost (run is " + pg::RunStateText(run.state) + ")");
    }
    if (run.cancel_requested) {
      tx.exec_prepared("cancel_run_now", update.run_id);
      InsertEvent(tx, update.run_id, run, v1::RUN_STATE_CANCELLED, run.attempt,
                  "cancelled at heartbeat");
      EndSweepIfDone(tx, run.sweep_id);
      return HeartbeatResult{absl::Now(), true};
    }
    const pqxx::result rows =
        tx.exec_prepared("heartbeat", update.run_id, Seconds(update.ttl),
                         static_cast<int64_t>(update.step), pg::CheckpointStep(update.checkpoint),
                         pg::CheckpointUri(update.checkpoint), update.worker_id);
    if (run.state == v1::RUN_STATE_LEASED) {
      InsertEvent(tx, update.run_id, run, v1::RUN_STATE_RUNNING, run.attempt, "started");
    }
    return HeartbeatResult{pg::TimeFromMicros(rows[0][0].as<int64_t>()), false};
  });
}

absl::StatusOr<MetricsAppendResult> PostgresRunStore::AppendMetrics(
    const std::string& run_id, int64_t lease_epoch, const std::vector<v1::MetricPoint>& points) {
  const pg::MetricArrays a = pg::MetricsAsArrays(points);
  // One statement (server/sql/append_metric_arrays.sql): lock, fencing check and insert.
  return pg::WithSingleStatement(
      *pool_, [&](pqxx::nontransaction& tx) -> absl::StatusOr<MetricsAppendResult> {
        pqxx::result stored;
        try {
          stored = tx.exec_prepared("append_metric_arrays", run_id, lease_epoch, a.increasing,
                                    a.step, a.attempt, a.tokens, a.unique_tokens, a.epoch,
                                    a.train_bpc, a.val_bpc, a.learning_rate, a.grad_norm,
                                    a.aux_loss, a.z_loss, a.tokens_per_second, a.flops_per_second,
                                    a.flops, a.expert_load, a.eval_bpc, a.logged_us);
        } catch (const pqxx::sql_error& e) {
          if (absl::Status status = FencingError(e, run_id, lease_epoch); !status.ok()) {
            return status;
          }
          throw;
        }
        MetricsAppendResult result;
        result.accepted = stored[0][0].as<uint32_t>();
        result.duplicates = static_cast<uint32_t>(points.size()) - result.accepted;
        return result;
      });
}

// A failure applies the scheduler's decision in a multi-statement transaction (a cancellation
// requested meanwhile wins); successes go in batches (postgres_run_store_batches.cc).
absl::StatusOr<CompletionResult> PostgresRunStore::CompleteRunFailed(const Completion& completion) {
  return WithTransaction(*pool_, [&](pqxx::work& tx) -> absl::StatusOr<CompletionResult> {
    PARITY_ASSIGN_OR_RETURN(const LockedRun run, LockRun(tx, completion.run_id));
    PARITY_RETURN_IF_ERROR(
        CheckLeaseEpoch(completion.run_id, completion.lease_epoch, run.lease_epoch));
    CompletionResult result;
    if (IsLive(run.state)) {
      if (run.attempt != completion.decided_at_attempt) {
        return absl::AbortedError(absl::StrCat("run ", completion.run_id, " is at attempt ",
                                               run.attempt, "; the retry decision was made for ",
                                               completion.decided_at_attempt));
      }
      RetryDecision decision = completion.retry;
      if (run.cancel_requested) {
        decision = {v1::RUN_STATE_CANCELLED, run.attempt, {}, completion.retry.next_preemptions};
      }
      const v1::RunState to = decision.next_state;
      const uint32_t attempt = decision.next_attempt;
      result.retry_delay = decision.delay;
      tx.exec_prepared("complete_failure", completion.run_id, pg::RunStateText(to), attempt,
                       Seconds(decision.delay), pg::FailureClassText(completion.failure_class),
                       completion.failure_status.code(), completion.failure_status.message(),
                       pg::CheckpointStep(completion.checkpoint),
                       pg::CheckpointUri(completion.checkpoint),
                       static_cast<int64_t>(decision.next_preemptions));
      const std::string reason = absl::StrCat(pg::FailureClassText(completion.failure_class), ": ",
                                              completion.failure_status.message());
      InsertEvent(tx, completion.run_id, run, to, attempt, reason);
      if (IsFinal(to)) EndSweepIfDone(tx, run.sweep_id);
    }
    // Otherwise this epoch already completed (or was cancelled): report the run as it is.
    result.run = pg::RunFromRow(tx.exec_prepared("get_run", completion.run_id)[0]);
    return result;
  });
}

absl::StatusOr<ReapResult> PostgresRunStore::ReapExpiredLeases(int limit) {
  return WithTransaction(*pool_, [&](pqxx::work& tx) -> absl::StatusOr<ReapResult> {
    ReapResult result;
    std::vector<std::string> ended_sweeps;
    for (const auto& row : tx.exec_prepared("reap_expired", limit, kOutageLapseMessage)) {
      const v1::RunState state = pg::RunStateFromText(row[1].c_str());
      if (state == v1::RUN_STATE_PENDING) {
        row[2].as<bool>() ? ++result.outage_requeued : ++result.requeued;
        continue;
      }
      state == v1::RUN_STATE_FAILED ? ++result.failed : ++result.cancelled;
      ended_sweeps.push_back(row[0].c_str());
    }
    std::sort(ended_sweeps.begin(), ended_sweeps.end());
    ended_sweeps.erase(std::unique(ended_sweeps.begin(), ended_sweeps.end()), ended_sweeps.end());
    for (const std::string& sweep_id : ended_sweeps) EndSweepIfDone(tx, sweep_id);
    tx.exec_prepared("finalize_sweeps");
    return result;
  });
}

absl::StatusOr<ServiceLiveness> PostgresRunStore::RecordReaperPass(const ReaperPass& pass) {
  return WithTransaction(*pool_, [&](pqxx::work& tx) -> absl::StatusOr<ServiceLiveness> {
    const pqxx::row row = tx.exec_prepared(
        "record_reaper_pass", pass.outage, absl::ToDoubleSeconds(pass.max_silence),
        absl::ToDoubleSeconds(pass.lease_ttl), absl::ToDoubleSeconds(pass.grace))[0];
    const auto time = [&](const char* column) {
      return row[column].is_null() ? absl::InfinitePast()
                                   : absl::FromUnixMicros(row[column].as<int64_t>());
    };
    return ServiceLiveness{.outage = row["outage"].as<bool>(),
                           .up_since = time("up_since_us"),
                           .charge_from = time("charge_from_us"),
                           .reap_from = time("reap_from_us")};
  });
}

absl::StatusOr<RetentionResult> PostgresRunStore::ApplyRetention(const RetentionPolicy& policy) {
  return WithTransaction(*pool_, [&](pqxx::work& tx) -> absl::StatusOr<RetentionResult> {
    // many rows in one pass, rarely
    tx.exec_params(pg::Statement("set_transaction_statement_timeout"), "10min");
    const pqxx::row row =
        tx.exec_prepared("apply_telemetry_retention", absl::ToDoubleSeconds(policy.metrics_full),
                         static_cast<int>(std::max<uint32_t>(policy.thinned_points, 1)),
                         absl::ToDoubleSeconds(policy.events),
                         absl::ToDoubleSeconds(policy.workers), policy.sweeps_per_pass)[0];
    RetentionResult result;
    result.sweeps_thinned = row["sweeps_thinned"].as<int>();
    result.points_deleted = row["points_deleted"].as<int64_t>();
    result.sweeps_pruned = row["sweeps_pruned"].as<int>();
    result.events_deleted = row["events_deleted"].as<int64_t>();
    result.workers_deleted = row["workers_deleted"].as<int>();
    return result;
  });
}

}  // namespace parity::server
