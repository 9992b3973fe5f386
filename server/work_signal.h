// WorkSignal: wakes idle LeaseRun long polls when work may have appeared. It only wakes; the
// lease transaction decides who gets a run, so a spurious or missed wake-up costs latency, never
// correctness (pollers also re-check every idle_poll_interval). Thread-safe.
#pragma once

#include <cstdint>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace parity::server {

class WorkSignal {
 public:
  // Read before looking for work; pass to WaitForChange so a Notify() in between is not lost.
  uint64_t generation() const {
    absl::MutexLock lock(&mu_);
    return generation_;
  }

  void Notify() {
    absl::MutexLock lock(&mu_);
    ++generation_;
  }

  // Blocks until Notify() was called after `seen` was read, or until `deadline`.
  bool WaitForChange(uint64_t seen, absl::Time deadline) {
    absl::MutexLock lock(&mu_);
    auto changed = [this, seen]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return generation_ != seen; };
    return mu_.AwaitWithDeadline(absl::Condition(&changed), deadline);
  }

 private:
  mutable absl::Mutex mu_;
  uint64_t generation_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace parity::server
