// MemoryRunStore's RunQueue half: leases in lease_runs.sql's order (priority, then fewest live
// runs, then the oldest sweep; a sweep's runs in grid order), fencing checks (CheckLeaseEpoch,
// store_errors.h) before any write, completions applied as the caller decided them, the reaper's
// rules of reap_expired, and an event per transition with the reason PostgreSQL writes.
#include <algorithm>
#include <limits>
#include <set>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "core/proto_time.h"
#include "core/summary_check.h"
#include "server/store/memory/memory_run_store.h"
#include "server/store/store_errors.h"
#include "server/store/uuid.h"

namespace parity::server {
namespace {

bool IsLive(v1::RunState state) {
  return state == v1::RUN_STATE_LEASED || state == v1::RUN_STATE_RUNNING;
}

std::string StateName(v1::RunState state) {
  std::string name = v1::RunState_Name(state);
  return name.substr(std::string("RUN_STATE_").size());
}

// What PostgresRunStore groups requests by: requests with equal keys share one statement.
auto OfferKey(const LeaseRequest& request) {
  std::vector<uint64_t> memory;
  for (const auto& gpu : GpusLargestFirst(request.offer)) memory.push_back(gpu.memory_bytes);
  return std::make_tuple(request.offer.cpu_threads, request.offer.host_memory_bytes, memory,
                         absl::ToInt64Milliseconds(request.ttl));
}

}  // namespace

std::string FailureClassName(v1::FailureClass failure_class) {
  if (!v1::FailureClass_IsValid(failure_class)) return absl::StrCat("class ", failure_class);
  std::string name = v1::FailureClass_Name(failure_class);
  return name.substr(std::string("FAILURE_CLASS_").size());
}

absl::StatusOr<v1::Worker> MemoryRunStore::RegisterWorker(const WorkerRegistration& worker) {
  absl::MutexLock lock(&mu_);
  const std::string id = worker.worker_id.empty() ? NewId() : worker.worker_id;
  if (auto it = workers_.find(id); it != workers_.end() && !worker.owner.empty() &&
                                   !it->second.owner.empty() && it->second.owner != worker.owner) {
    return WorkerOfAnotherIdentityError(id, "register");
  }
  WorkerRow& row = workers_[id];
  if (row.owner.empty()) row.owner = worker.owner;
  row.worker.Clear();
  row.worker.set_worker_id(id);
  row.worker.set_hostname(worker.hostname);
  for (const v1::Device& device : worker.devices) *row.worker.add_devices() = device;
  for (const auto& [key, value] : worker.labels) (*row.worker.mutable_labels())[key] = value;
  row.worker.set_version(worker.version);
  for (const v1::DatasetHolding& dataset : worker.datasets) *row.worker.add_datasets() = dataset;
  row.last_seen = now_();
  v1::Worker result = row.worker;
  *result.mutable_last_seen_time() = ToProtoTime(row.last_seen);
  return result;
}

absl::StatusOr<std::string> MemoryRunStore::ClaimWorker(const std::string& worker_id,
                                                        const std::string& owner) {
  absl::MutexLock lock(&mu_);
  auto it = workers_.find(worker_id);
  if (it == workers_.end()) return NotFoundError("worker", worker_id, "is not registered");
  if (it->second.owner.empty()) it->second.owner = owner;
  return it->second.owner;
}

absl::StatusOr<std::vector<RunHolding>> MemoryRunStore::RunHoldings(
    const std::string& worker_id, const std::vector<std::string>& run_ids) {
  absl::MutexLock lock(&mu_);
  std::vector<RunHolding> holdings;
  for (const std::string& run_id : run_ids) {
    auto it = runs_.find(run_id);
    if (it == runs_.end()) continue;
    // As run_holdings: the current lease, or an event recorded under the worker's id.
    bool held = !worker_id.empty() && it->second.lease_owner == worker_id;
    for (auto event = events_.begin(); !held && event != events_.end(); ++event) {
      held = event->second.event.run_id == run_id && event->second.worker_id == worker_id &&
             !worker_id.empty();
    }
    holdings.push_back({run_id, held});
  }
  return holdings;
}

std::vector<absl::StatusOr<std::optional<LeasedRun>>> MemoryRunStore::LeaseNextRuns(
    const std::vector<const LeaseRequest*>& requests) {
  // Requests with the same offer are served one after another, groups in the order of their
  // first request: what PostgresRunStore's one statement per group gives.
  std::vector<absl::StatusOr<std::optional<LeasedRun>>> results(requests.size(),
                                                                std::optional<LeasedRun>());
  std::vector<std::vector<size_t>> groups;
  std::vector<decltype(OfferKey(*requests[0]))> keys;
  for (size_t i = 0; i < requests.size(); ++i) {
    auto key = OfferKey(*requests[i]);
    auto it = std::find(keys.begin(), keys.end(), key);
    if (it == keys.end()) {
      keys.push_back(std::move(key));
      groups.emplace_back();
      it = keys.end() - 1;
    }
    groups[it - keys.begin()].push_back(i);
  }
  absl::MutexLock lock(&mu_);
  // Retries first, as PostgresRunStore looks them up before it leases the groups.
  std::vector<bool> answered(requests.size(), false);
  for (size_t i = 0; i < requests.size(); ++i) {
    if (!requests[i]->retry) continue;
    if (std::optional<LeasedRun> again = AnswerAgain(*requests[i])) {
      results[i] = std::move(again);
      answered[i] = true;
    }
  }
  for (const std::vector<size_t>& group : groups) {
    for (const size_t i : group) {
      if (!answered[i]) results[i] = LeaseOne(*requests[i]);
    }
  }
  return results;
}

std::optional<LeasedRun> MemoryRunStore::AnswerAgain(const LeaseRequest& request) {
  if (request.request_id.empty()) return std::nullopt;
  const absl::Time now = now_();
  for (auto& [run_id, run] : runs_) {
    // As renew_retried_lease: granted to this request, never heartbeated, not yet lapsed.
    if (run.run.state() != v1::RUN_STATE_LEASED || run.lease_owner != request.worker_id ||
        run.lease_request_id != request.request_id || run.lease_expires <= now) {
      continue;
    }
    run.lease_expires = now + request.ttl;
    LeasedRun leased;
    leased.run = RenderRun(run);
    leased.lease = leased.run.lease();
    leased.answered_again = true;
    return leased;
  }
  return std::nullopt;
}

absl::StatusOr<std::optional<LeasedRun>> MemoryRunStore::LeaseOne(const LeaseRequest& request) {
  auto worker = workers_.find(request.worker_id);
  if (!IsUuid(request.worker_id) || worker == workers_.end()) {
    return NotFoundError("worker", request.worker_id, "is not registered");
  }
  const absl::Time now = now_();
  if (worker->second.last_seen < now - absl::Seconds(1)) worker->second.last_seen = now;
  const std::vector<ResourceOffer::Gpu> gpus = GpusLargestFirst(request.offer);
  // A run pinned to a dataset digest goes only to a worker that holds that copy (lease_runs.sql).
  std::set<std::string> held;
  for (const v1::DatasetHolding& d : worker->second.worker.datasets()) held.insert(d.digest());
  auto fits = [&](const RunRow& run) {
    if (run.run.state() != v1::RUN_STATE_PENDING || run.not_before > now) return false;
    if (run.ranks > 1) return false;  // a gang: GangQueue places it (memory_gang_queue.cc)
    const std::string& pin = run.run.spec().data().dataset_digest();
    if (!pin.empty() && !held.contains(pin)) return false;
    if (request.offer.host_memory_bytes != 0 &&
        run.memory_bytes > request.offer.host_memory_bytes) {
      return false;
    }
    if (run.gpus == 0) return run.cpu_threads <= request.offer.cpu_threads;
    if (run.gpus > gpus.size()) return false;
    const uint64_t memory = gpus[run.gpus - 1].memory_bytes;
    return memory == 0 || memory >= run.gpu_memory_bytes;
  };
  // The best open sweep with a fitting run: priority desc, fewest live runs, oldest.
  const SweepRow* best = nullptr;
  RunRow* best_run = nullptr;
  std::tuple<int32_t, int, uint64_t> best_rank;
  for (const auto& [sweep_id, sweep] : sweeps_) {
    if (sweep.ended) continue;
    RunRow* first = nullptr;
    for (const std::string& run_id : sweep.run_ids) {
      RunRow& run = runs_.at(run_id);
      if (fits(run)) {
        first = &run;
        break;
      }
    }
    if (first == nullptr) continue;
    const std::tuple<int32_t, int, uint64_t> rank(-sweep.spec.priority(), LiveRuns(sweep),
                                                  sweep.created_seq);
    if (best == nullptr || rank < best_rank) {
      best = &sweep;
      best_run = first;
      best_rank = rank;
    }
  }
  if (best_run == nullptr) return std::optional<LeasedRun>();
  RunRow& run = *best_run;
  run.run.set_state(v1::RUN_STATE_LEASED);
  run.lease_owner = request.worker_id;
  run.lease_request_id = request.request_id;
  ++run.lease_epoch;
  run.lease_expires = now + request.ttl;
  run.run.set_cancel_requested(false);
  run.devices.clear();
  if (run.gpus == 0) {
    run.devices.push_back(request.offer.cpu_device_index);
  } else {
    for (uint32_t g = 0; g < run.gpus; ++g) run.devices.push_back(gpus[g].index);
  }
  AddEvent(run, v1::RUN_STATE_PENDING, run.run.attempt(), "leased", run.lease_owner);
  LeasedRun leased;
  leased.run = RenderRun(run);
  leased.lease = leased.run.lease();
  return std::optional<LeasedRun>(std::move(leased));
}

absl::StatusOr<HeartbeatResult> MemoryRunStore::Heartbeat(const HeartbeatUpdate& update) {
  absl::MutexLock lock(&mu_);
  auto it = runs_.find(update.run_id);
  if (it == runs_.end()) return NotFoundError("run", update.run_id);
  RunRow& run = it->second;
  if (absl::Status fenced = CheckLeaseEpoch(update.run_id, update.lease_epoch, run.lease_epoch);
      !fenced.ok()) {
    return fenced;
  }
  const absl::Time now = now_();
  if (run.run.state() == v1::RUN_STATE_CANCELLED) return HeartbeatResult{now, true};
  if (!IsLive(run.run.state()) || run.lease_owner != update.worker_id) {
    return LeaseEpochError(update.run_id,
                           "the lease was lost (run is " + StateName(run.run.state()) + ")");
  }
  if (run.run.cancel_requested()) {
    const v1::RunState from = run.run.state();
    run.run.set_state(v1::RUN_STATE_CANCELLED);
    run.run.set_cancel_requested(false);
    AddEvent(run, from, run.run.attempt(), "cancelled at heartbeat", run.lease_owner);
    run.lease_owner.clear();
    run.lease_request_id.clear();
    *run.run.mutable_end_time() = ToProtoTime(now);
    EndSweepIfDone(sweeps_.at(run.run.sweep_id()));
    return HeartbeatResult{now, true};
  }
  if (auto worker = workers_.find(update.worker_id); worker != workers_.end()) {
    worker->second.last_seen = now;
  }
  if (run.run.state() == v1::RUN_STATE_LEASED) {
    run.run.set_state(v1::RUN_STATE_RUNNING);
    AddEvent(run, v1::RUN_STATE_LEASED, run.run.attempt(), "started", run.lease_owner);
  }
  run.lease_expires = now + update.ttl;
  if (!run.run.has_start_time()) *run.run.mutable_start_time() = ToProtoTime(now);
  run.run.set_latest_step(std::max<uint64_t>(run.run.latest_step(), update.step));
  if (update.checkpoint) {
    run.run.mutable_checkpoint()->set_step(update.checkpoint->step());
    run.run.mutable_checkpoint()->set_uri(update.checkpoint->uri());
    *run.run.mutable_checkpoint()->mutable_create_time() = ToProtoTime(now);
  }
  return HeartbeatResult{run.lease_expires, false};
}

absl::StatusOr<MetricsAppendResult> MemoryRunStore::AppendMetrics(
    const std::string& run_id, int64_t lease_epoch, const std::vector<v1::MetricPoint>& points) {
  absl::MutexLock lock(&mu_);
  auto it = runs_.find(run_id);
  if (it == runs_.end()) return NotFoundError("run", run_id);
  RunRow& run = it->second;
  if (absl::Status fenced = CheckLeaseEpoch(run_id, lease_epoch, run.lease_epoch); !fenced.ok()) {
    return fenced;
  }
  if (run.run.state() == v1::RUN_STATE_PENDING) {
    return LeaseEpochError(run_id, "the lease was lost (run is PENDING)");
  }
  if (!IsLive(run.run.state())) {
    return LeaseEpochError(run_id, absl::StrCat("the run has ended (", StateName(run.run.state()),
                                                ") and takes no more points"));
  }
  MetricsAppendResult result;
  for (const v1::MetricPoint& given : points) {
    // What the metrics table keeps of a point: no run id, the time to the microsecond.
    v1::MetricPoint point = given;
    point.clear_run_id();
    if (point.has_time()) point.mutable_time()->set_nanos(point.time().nanos() / 1000 * 1000);
    // As append_metric_arrays: a point of an older lease is replaced, one of this lease kept.
    auto [stored, inserted] = run.metrics.try_emplace(point.step(), point, lease_epoch);
    if (inserted) {
      ++result.accepted;
    } else if (stored->second.second < lease_epoch) {
      stored->second = {std::move(point), lease_epoch};
      ++result.accepted;
    }
  }
  result.duplicates = static_cast<uint32_t>(points.size()) - result.accepted;
  if (result.accepted > 0) {
    // As append_metric_arrays: progress follows the whole batch once anything was stored, the
    // latest lease's even below what an older one had reached.
    const v1::MetricPoint* last_val = nullptr;
    uint64_t batch_max = 0;
    for (const v1::MetricPoint& point : points) {
      batch_max = std::max(batch_max, point.step());
      if (point.has_val_bpc() && (last_val == nullptr || point.step() > last_val->step())) {
        last_val = &point;
      }
    }
    run.run.set_latest_step(batch_max);
    if (last_val != nullptr) run.run.set_latest_val_bpc(last_val->val_bpc());
  }
  return result;
}

std::vector<absl::StatusOr<CompletionResult>> MemoryRunStore::CompleteRuns(
    const std::vector<const Completion*>& completions) {
  std::vector<absl::StatusOr<CompletionResult>> results;
  results.reserve(completions.size());
  absl::MutexLock lock(&mu_);
  for (const Completion* completion : completions) results.push_back(CompleteOne(*completion));
  return results;
}

absl::StatusOr<CompletionResult> MemoryRunStore::CompleteOne(const Completion& completion) {
  auto it = runs_.find(completion.run_id);
  if (it == runs_.end()) return NotFoundError("run", completion.run_id);
  RunRow& run = it->second;
  if (absl::Status fenced =
          CheckLeaseEpoch(completion.run_id, completion.lease_epoch, run.lease_epoch);
      !fenced.ok()) {
    return fenced;
  }
  CompletionResult result;
  const absl::Time now = now_();
  // A success for a run the reaper requeued that no one leased since (the epoch still matches)
  // is recorded, as complete_runs_success does: the holder was slow to report, not dead.
  const bool requeued_success =
      completion.success.has_value() && run.run.state() == v1::RUN_STATE_PENDING;
  // Otherwise, not live: this epoch already completed (or was cancelled): the run as it is.
  if (IsLive(run.run.state()) || requeued_success) {
    const v1::RunState from = run.run.state();
    if (completion.success) {
      const uint64_t resumed_from = run.run.has_checkpoint() ? run.run.checkpoint().step() : 0;
      result.invalid_summary =
          core::SummaryMismatch(run.run.spec(), *completion.success, resumed_from);
      if (!result.invalid_summary.empty()) {
        result.run = RenderRun(run);
        return result;
      }
    }
    if (completion.checkpoint) {
      run.run.mutable_checkpoint()->set_step(completion.checkpoint->step());
      run.run.mutable_checkpoint()->set_uri(completion.checkpoint->uri());
    }
    if (completion.success) {
      run.run.set_state(v1::RUN_STATE_SUCCEEDED);
      *run.run.mutable_summary() = *completion.success;
      run.run.set_latest_step(
          std::max<uint64_t>(run.run.latest_step(), completion.success->steps()));
      if (!run.run.has_start_time()) *run.run.mutable_start_time() = ToProtoTime(now);
      AddEvent(run, from, run.run.attempt(), "succeeded", run.lease_owner);
    } else {
      if (run.run.attempt() != completion.decided_at_attempt) {
        return absl::AbortedError(
            absl::StrCat("run ", completion.run_id, " is at attempt ", run.run.attempt(),
                         "; the retry decision was made for ", completion.decided_at_attempt));
      }
      RetryDecision decision = completion.retry;
      if (run.run.cancel_requested()) {
        decision = {
            v1::RUN_STATE_CANCELLED, run.run.attempt(), {}, completion.retry.next_preemptions};
      }
      run.run.set_state(decision.next_state);
      run.run.set_preemptions(decision.next_preemptions);
      run.run.set_attempt(decision.next_attempt);
      run.not_before = now + decision.delay;
      run.run.set_failure_class(completion.failure_class);
      run.run.mutable_failure()->set_code(completion.failure_status.code());
      run.run.mutable_failure()->set_message(completion.failure_status.message());
      result.retry_delay = decision.delay;
      const std::string class_name = FailureClassName(completion.failure_class);
      AddEvent(run, from, decision.next_attempt,
               absl::StrCat(class_name, ": ", completion.failure_status.message()),
               run.lease_owner);
    }
    run.lease_owner.clear();
    run.lease_request_id.clear();
    run.run.set_cancel_requested(false);
    if (run.run.state() == v1::RUN_STATE_PENDING) {
      run.run.clear_end_time();
    } else {
      *run.run.mutable_end_time() = ToProtoTime(now);
      EndSweepIfDone(sweeps_.at(run.run.sweep_id()));
    }
  }
  result.run = RenderRun(run);
  return result;
}

absl::StatusOr<ReapResult> MemoryRunStore::ReapExpiredLeases(int limit) {
  absl::MutexLock lock(&mu_);
  const absl::Time now = now_();
  ReapResult result;
  if (now < liveness_.reap_from) return result;  // an outage's holders may still reconnect
  std::vector<RunRow*> expired;
  for (auto& [run_id, run] : runs_) {
    if (IsLive(run.run.state()) && run.lease_expires < now) expired.push_back(&run);
  }
  std::sort(expired.begin(), expired.end(),
            [](const RunRow* a, const RunRow* b) { return a->lease_expires < b->lease_expires; });
  if (static_cast<int>(expired.size()) > limit) expired.resize(limit);
  for (RunRow* row : expired) {
    v1::Run& run = row->run;
    const v1::RunState from = run.state();
    const bool outage = row->lease_expires < liveness_.charge_from;
    if (run.cancel_requested()) {
      run.set_state(v1::RUN_STATE_CANCELLED);
      ++result.cancelled;
    } else {
      run.set_failure_class(v1::FAILURE_CLASS_LEASE_EXPIRED);
      run.mutable_failure()->set_message(outage ? kOutageLapseMessage
                                                : "lease expired without a heartbeat");
      if (outage) {
        run.set_state(v1::RUN_STATE_PENDING);
        ++result.outage_requeued;
      } else if (run.attempt() >= run.max_attempts()) {
        run.set_state(v1::RUN_STATE_FAILED);
        ++result.failed;
      } else {
        run.set_state(v1::RUN_STATE_PENDING);
        run.set_attempt(run.attempt() + 1);
        ++result.requeued;
      }
    }
    if (run.state() != v1::RUN_STATE_PENDING) *run.mutable_end_time() = ToProtoTime(now);
    run.set_cancel_requested(false);
    // As reap_expired: only a lapse the outage excuses is worded so in the run's history.
    AddEvent(*row, from, run.attempt(),
             outage && run.state() == v1::RUN_STATE_PENDING ? "lease expired during an outage"
                                                            : "lease expired",
             row->lease_owner);
    row->lease_owner.clear();
    row->lease_request_id.clear();
  }
  // As finalize_sweeps: every open sweep with no unfinished run ends here.
  for (auto& [sweep_id, sweep] : sweeps_) EndSweepIfDone(sweep);
  return result;
}

absl::StatusOr<ServiceLiveness> MemoryRunStore::RecordReaperPass(const ReaperPass& pass) {
  absl::MutexLock lock(&mu_);
  const absl::Time now = now_();
  liveness_.outage =
      pass.outage || (last_reaper_pass_ && now - *last_reaper_pass_ > pass.max_silence);
  last_reaper_pass_ = now;
  if (liveness_.outage) {  // as record_reaper_pass (server/sql/)
    liveness_.up_since = now;
    liveness_.charge_from = std::max(liveness_.charge_from, now + pass.lease_ttl);
    liveness_.reap_from = std::max(liveness_.reap_from, now + pass.grace);
  }
  return liveness_;
}

}  // namespace parity::server
