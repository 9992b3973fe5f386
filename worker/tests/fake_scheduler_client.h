// FakeSchedulerClient: an in-memory WorkerService for supervisor and lease-loop tests. Records what
// the worker sent and injects faults: a number of failures per call (UNAVAILABLE, or a chosen code
// for LeaseRun), cancellation after
// a heartbeat count, a lost lease. Thread-safe (a mutex around everything).
#pragma once

#include <map>
#include <set>
#include <utility>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "worker/scheduler_client.h"

namespace parity::worker {

class FakeSchedulerClient : public SchedulerClient {
 public:
  // Fault knobs, set before the run starts.
  int fail_heartbeats = 0;  // the next N heartbeats fail UNAVAILABLE
  int fail_metrics = 0;     // the next N ReportMetrics fail UNAVAILABLE
  int fail_completes = 0;   // the next N CompleteRun fail UNAVAILABLE
  int fail_leases = 0;      // the next N LeaseRun fail with lease_failure
  absl::StatusCode lease_failure = absl::StatusCode::kUnavailable;
  int cancel_after_heartbeats =
      -1;  // heartbeat number (1-based) from which cancel_requested is set
  int lose_lease_after_heartbeats = -1;  // from this heartbeat on: FAILED_PRECONDITION everywhere

  absl::StatusOr<parity::v1::RegisterWorkerResponse> RegisterWorker(
      const parity::v1::RegisterWorkerRequest& r) override {
    absl::MutexLock l(&mu);
    registrations.push_back(r);
    parity::v1::RegisterWorkerResponse resp;
    resp.set_worker_id("worker-1");
    return resp;
  }
  absl::StatusOr<parity::v1::LeaseRunResponse> LeaseRun(
      const parity::v1::LeaseRunRequest& r) override {
    absl::MutexLock l(&mu);
    lease_requests.push_back(r);
    if (fail_leases > 0) {
      --fail_leases;
      return absl::Status(lease_failure, "lease failed (fake)");
    }
    if (leases.empty()) {
      // A short long poll: wait a little (or until CancelLongPolls) and return empty.
      mu.AwaitWithTimeout(absl::Condition(&poll_cancelled), absl::Milliseconds(50));
      if (poll_cancelled) return absl::CancelledError("cancelled");
      return parity::v1::LeaseRunResponse{};
    }
    parity::v1::LeaseRunResponse lease = leases.front();
    leases.erase(leases.begin());
    return lease;
  }
  absl::StatusOr<parity::v1::HeartbeatResponse> Heartbeat(
      const parity::v1::HeartbeatRequest& r) override {
    absl::MutexLock l(&mu);
    ++heartbeat_calls;
    if (lost) return absl::FailedPreconditionError("stale lease epoch");
    if (fail_heartbeats > 0) {
      --fail_heartbeats;
      return absl::UnavailableError("scheduler down");
    }
    heartbeats.push_back(r);
    if (r.has_checkpoint()) {
      uint64_t stored = 0;  // every step 1..stored has its point
      while (steps.count(stored + 1) > 0) ++stored;
      checkpoint_reports.push_back({r.checkpoint().step(), stored});
    }
    if (lose_lease_after_heartbeats > 0 &&
        static_cast<int>(heartbeats.size()) >= lose_lease_after_heartbeats) {
      lost = true;
      lost_at = absl::Now();
      return absl::FailedPreconditionError("stale lease epoch");
    }
    parity::v1::HeartbeatResponse resp;
    resp.set_cancel_requested(cancel_after_heartbeats > 0 &&
                              static_cast<int>(heartbeats.size()) >= cancel_after_heartbeats);
    return resp;
  }
  absl::StatusOr<parity::v1::ReportMetricsResponse> ReportMetrics(
      const parity::v1::ReportMetricsRequest& r) override {
    absl::MutexLock l(&mu);
    ++metric_calls;
    if (lost) return absl::FailedPreconditionError("stale lease epoch");
    if (fail_metrics > 0) {
      --fail_metrics;
      return absl::UnavailableError("scheduler down");
    }
    parity::v1::ReportMetricsResponse resp;
    for (const parity::v1::MetricPoint& p : r.points()) {
      max_batch = std::max<size_t>(max_batch, static_cast<size_t>(r.points_size()));
      if (steps.insert(p.step()).second) {
        resp.set_accepted(resp.accepted() + 1);
        points.push_back(p);
      } else {
        resp.set_duplicates(resp.duplicates() + 1);
      }
    }
    return resp;
  }
  absl::StatusOr<parity::v1::CompleteRunResponse> CompleteRun(
      const parity::v1::CompleteRunRequest& r) override {
    absl::MutexLock l(&mu);
    if (lost) return absl::FailedPreconditionError("stale lease epoch");
    if (fail_completes > 0) {
      --fail_completes;
      return absl::UnavailableError("scheduler down");
    }
    completes.push_back(r);
    return parity::v1::CompleteRunResponse{};
  }

  // Answers from `retention` by run id; a run it does not name does not exist.
  absl::StatusOr<parity::v1::CheckpointRetentionResponse> CheckpointRetention(
      const parity::v1::CheckpointRetentionRequest& r) override {
    absl::MutexLock l(&mu);
    retention_requests.push_back(r);
    parity::v1::CheckpointRetentionResponse resp;
    for (const std::string& run_id : r.run_ids()) {
      auto it = retention.find(run_id);
      parity::v1::RunRetention* entry = resp.add_runs();
      if (it != retention.end()) *entry = it->second;
      entry->set_run_id(run_id);
    }
    return resp;
  }

  // Gangs: the post is kept; a check-in is released once something was posted and
  // `hold_check_ins` check-ins have been answered unreleased.
  absl::StatusOr<parity::v1::RendezvousResponse> PostRendezvous(
      const parity::v1::PostRendezvousRequest& r) override {
    absl::MutexLock l(&mu);
    if (lost) return absl::FailedPreconditionError("stale gang epoch");
    posts.push_back(r);
    if (relay.empty()) relay = r.address();
    return parity::v1::RendezvousResponse{};
  }
  absl::StatusOr<parity::v1::RendezvousResponse> CheckInRendezvous(
      const parity::v1::CheckInRendezvousRequest& r) override {
    absl::MutexLock l(&mu);
    if (lost) return absl::FailedPreconditionError("stale gang epoch");
    check_ins.push_back(r);
    parity::v1::RendezvousResponse resp;
    if (hold_check_ins > 0) {
      --hold_check_ins;
    } else if (!relay.empty()) {
      resp.set_released(true);
      resp.set_address(relay);
    }
    return resp;
  }

  void CancelLongPolls() override {
    absl::MutexLock l(&mu);
    poll_cancelled = true;
  }

  absl::Mutex mu;
  bool poll_cancelled = false;
  int hold_check_ins = 0;  // answer this many check-ins unreleased first
  std::string relay;       // what a released check-in returns (set by the first post)
  std::vector<parity::v1::PostRendezvousRequest> posts;
  std::vector<parity::v1::CheckInRendezvousRequest> check_ins;
  absl::Time lost_at = absl::InfiniteFuture();  // when lose_lease_after_heartbeats struck
  std::vector<parity::v1::LeaseRunRequest> lease_requests;
  bool lost = false;
  int heartbeat_calls = 0, metric_calls = 0;
  size_t max_batch = 0;
  std::vector<parity::v1::LeaseRunResponse> leases;
  std::vector<parity::v1::RegisterWorkerRequest> registrations;
  std::vector<parity::v1::HeartbeatRequest> heartbeats;
  std::vector<parity::v1::MetricPoint> points;
  std::set<uint64_t> steps;
  // Per heartbeat that reported a checkpoint: its step, and up to which step every point was
  // stored at that moment.
  std::vector<std::pair<uint64_t, uint64_t>> checkpoint_reports;
  std::vector<parity::v1::CompleteRunRequest> completes;
  std::map<std::string, parity::v1::RunRetention> retention;
  std::vector<parity::v1::CheckpointRetentionRequest> retention_requests;
};

}  // namespace parity::worker
