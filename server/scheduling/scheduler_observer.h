// SchedulerObserver: a seam for metrics and dashboards (SchedulerMetrics), told what happened by
// the scheduling units (SweepsService, LeasesService, Upkeep) and never asked anything.
#pragma once

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "parity/v1/run.pb.h"
#include "parity/v1/sweep.pb.h"
#include "server/store/gang_queue.h"
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
  // Gangs (gang_leases.h): the counts as last read (at most once per idle_poll_interval while
  // workers poll), a rendezvous released (`took` since the placement), and a whole-gang restart
  // (or end) with its reason: "rank_failed", "slot_lapsed", "rendezvous_timeout" or
  // "placement_raced".
  virtual void OnGangCounts(const GangCounts& counts) {}
  virtual void OnGangRendezvous(absl::Duration took) {}
  virtual void OnGangRestarted(const v1::Run& run, absl::string_view reason) {}
};

}  // namespace parity::server
