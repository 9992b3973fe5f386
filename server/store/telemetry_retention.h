// TelemetryRetention: what keeps the telemetry tables from growing without bound — the metric
// curves of long-ended sweeps thinned, their event histories cut to each run's last event,
// workers not seen for long forgotten. The scheduler runs a pass every --retention-interval
// (Scheduler::ApplyRetention); each pass is bounded (sweeps_per_pass) and idempotent.
#pragma once

#include <cstdint>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "server/store/leader_leases.h"

namespace parity::server {

struct RetentionPolicy {
  // Metrics of a sweep ended longer ago than this are thinned to a curve of at most
  // thinned_points training points per run (every evaluation point and the last one stay).
  absl::Duration metrics_full = absl::Hours(24 * 30);
  uint32_t thinned_points = 500;
  // Events of a sweep ended longer ago than this: each run keeps only its last one.
  absl::Duration events = absl::Hours(24 * 90);
  // A worker not seen for this long, holding no live lease, is forgotten.
  absl::Duration workers = absl::Hours(24 * 7);
  // Sweeps thinned (and pruned) per pass at most.
  int sweeps_per_pass = 20;
};

struct RetentionResult {
  int sweeps_thinned = 0;
  int64_t points_deleted = 0;
  int sweeps_pruned = 0;
  int64_t events_deleted = 0;
  int workers_deleted = 0;
};

class TelemetryRetention {
 public:
  virtual ~TelemetryRetention() = default;
  virtual absl::StatusOr<RetentionResult> ApplyRetention(const RetentionPolicy& policy) = 0;
  // The same under a leader's term (leader_leases.h): refused with LeaderEpochError, nothing
  // written, once the term is over.
  virtual absl::StatusOr<RetentionResult> ApplyRetentionFenced(const RetentionPolicy& policy,
                                                               const LeaderFence& fence) = 0;
};

}  // namespace parity::server
