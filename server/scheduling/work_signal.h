// WorkSignal: wakes idle LeaseRun long polls when work may have appeared. It only wakes; the
// lease transaction decides who gets a run, so a spurious or missed wake-up costs latency, never
// correctness (pollers also re-check every idle_poll_interval). Thread-safe.
//
// Parked long polls hold no thread (LeaseLongPolls); they learn of a Notify() through the one
// listener, which is called with the new generation under the signal's lock (so that clearing
// the listener waits for a call in progress): it must be quick and must not call back here.
#pragma once

#include <cstdint>
#include <functional>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace parity::server {

class WorkSignal {
 public:
  // Read before looking for work; a parked call that saw an older one is retried at once, so a
  // Notify() during the look is not lost.
  uint64_t generation() const {
    absl::MutexLock lock(&mu_);
    return generation_;
  }

  void Notify() {
    absl::MutexLock lock(&mu_);
    ++generation_;
    if (listener_) listener_(generation_);
  }

  // Replaces the listener (nullptr: none) and calls the new one with the current generation.
  void SetListener(std::function<void(uint64_t generation)> listener) {
    absl::MutexLock lock(&mu_);
    listener_ = std::move(listener);
    if (listener_) listener_(generation_);
  }

 private:
  mutable absl::Mutex mu_;
  uint64_t generation_ ABSL_GUARDED_BY(mu_) = 0;
  std::function<void(uint64_t)> listener_ ABSL_GUARDED_BY(mu_);
};

}  // namespace parity::server
