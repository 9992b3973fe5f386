// SchedulerObserver: a seam for metrics and dashboards (SchedulerMetrics), told what happened by
// the scheduling units (SweepsService, LeasesService, Upkeep) and never asked anything.
#pragma once

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "parity/v1/run.pb.h"
#include "parity/v1/sweep.pb.h"
#include "server/store/run_queue.h"
#include "server/store/telemetry_retention.h"

namespace parity::server {

// Called on RPC and upkeep threads, concurrently; implementations must be thread-safe and quick.
class SchedulerObserver {
 public:
  virtual ~SchedulerObserver() = default;
  virtual void OnSweepSubmitted(const v1::Sweep& sweep, bool deduplicated) {}
  virtual void OnRunLeased(const v1::Run& run, absl::Duration waited) {}
  virtual void OnMetricsStored(const MetricsAppendResult& result) {}
  virtual void OnRunCompleted(const v1::Run& run) {}
  virtual void OnLeasesReaped(const ReapResult& result) {}
  // A reaper pass failed (the database was away); expired leases wait for the next pass.
  virtual void OnReapFailed(const absl::Status& status) {}
  virtual void OnRetentionApplied(const RetentionResult& result) {}
};

}  // namespace parity::server
