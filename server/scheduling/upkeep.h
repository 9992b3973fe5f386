// Upkeep: the scheduler's passes that no call drives — the reaper (expired leases back to the
// queue, or failed past their attempts) and telemetry retention — over the two store interfaces
// they need, RunQueue and TelemetryRetention. SchedulerServer runs them on its reaper thread
// every --reap-interval and --retention-interval. Thread-safe, but meant for one caller at a
// time: two reaper passes at once are safe (the store takes each expired lease once) but pointless.
#pragma once

#include <atomic>
#include <optional>

#include "absl/status/statusor.h"
#include "server/scheduling/scheduler_observer.h"
#include "server/scheduling/scheduler_options.h"
#include "server/scheduling/work_signal.h"
#include "server/store/run_queue.h"
#include "server/store/telemetry_retention.h"

namespace parity::server {

class Upkeep {
 public:
  // `queue`, `retention`, `work_signal` and `observer` (may be null) must outlive this object.
  // Reads options.lease_ttl (the outage grace) and options.reap_batch.
  Upkeep(RunQueue& queue, TelemetryRetention& retention, WorkSignal& work_signal,
         SchedulerOptions options, SchedulerObserver* observer = nullptr);

  // Returns expired leases to the queue until none is left (called by the reaper thread). Each
  // pass first renews the reaper's liveness record in the store, which every replica shares; an
  // outage — this pass is the start-up pass, the previous one failed (the database was away), or
  // no replica recorded a pass for outage_silence — begins a grace: nothing is reaped for
  // outage_grace, and a lease that lapses before its holder could renew it after the outage goes
  // back to the queue without spending an attempt (their holders could not heartbeat, which is
  // no fault of the run).
  enum class ReapPass { kRegular, kStartUp };
  // With a fence (the elected leader's term, server/leadership/), every write is checked against
  // the term in its transaction and refused (LeaderEpochError, nothing written) once it is over.
  absl::StatusOr<ReapResult> ReapExpiredLeases(
      ReapPass pass = ReapPass::kRegular, const std::optional<LeaderFence>& fence = std::nullopt);
  // One telemetry retention pass (store/telemetry_retention.h); the server runs it periodically.
  absl::StatusOr<RetentionResult> ApplyRetention(
      const RetentionPolicy& policy, const std::optional<LeaderFence>& fence = std::nullopt);

 private:
  RunQueue& queue_;
  TelemetryRetention& retention_;
  WorkSignal& work_signal_;
  const SchedulerOptions options_;
  SchedulerObserver* const observer_;  // may be null
  // Set when a reaper pass failed, until a pass has recorded the outage in the store.
  std::atomic<bool> outage_known_{false};
};

}  // namespace parity::server
