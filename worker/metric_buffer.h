// Metric points waiting to reach the scheduler: batching and resend after a failure.
//
// The engine's reader thread adds points; the run's supervisor thread takes a batch, sends it, and
// acknowledges it only when the scheduler accepted it. An unacknowledged batch stays at the front
// and is sent again (the server is idempotent on (run, step), so a resend writes nothing twice).
// Bounded: past max_points the oldest points are dropped and counted (the scheduler has been away
// so long that memory matters more than those points).
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <optional>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "parity/v1/run.pb.h"

namespace parity::worker {

struct MetricBufferOptions {
  // A batch is due once this many points wait (count).
  size_t batch_points = 256;
  // ... or once the oldest waiting point is this old.
  absl::Duration max_delay = absl::Seconds(1);
  // Points kept while the scheduler is unreachable (count).
  size_t max_points = 200000;
};

// Thread-safe: Add from the reader thread, the rest from the supervisor thread.
class MetricBuffer {
 public:
  explicit MetricBuffer(MetricBufferOptions options = {}) : options_(options) {}

  void Add(parity::v1::MetricPoint point, absl::Time now);
  // Whether a batch should be sent now (full batch or oldest point past max_delay).
  bool FlushDue(absl::Time now) const;
  // A copy of the oldest ≤ batch_points points, still held until Acknowledge.
  std::vector<parity::v1::MetricPoint> PeekBatch() const;
  // The scheduler stored the first `count` points: forget them.
  void Acknowledge(size_t count);
  size_t size() const;
  // Points dropped because the buffer was full (count).
  uint64_t dropped() const;
  // Highest step added so far, 0 if none.
  uint64_t latest_step() const;
  // Lowest step still waiting for the scheduler, nullopt when nothing waits. A checkpoint at or
  // past it must not count for resume yet: a resume from it would leave those points unstored.
  std::optional<uint64_t> OldestPendingStep() const;

 private:
  struct Entry {
    parity::v1::MetricPoint point;
    absl::Time added;
  };
  const MetricBufferOptions options_;
  mutable absl::Mutex mu_;
  std::deque<Entry> pending_ ABSL_GUARDED_BY(mu_);  // oldest first
  uint64_t dropped_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t latest_step_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace parity::worker
