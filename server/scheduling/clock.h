// Time as a dependency, so tests can reason about deadlines without sleeping on the wall clock.
// A Clock tells the time and waits until a time on it: code that waits for a deadline (the
// parked long polls) takes its Clock, and a test drives a FakeClock with Advance().
#pragma once

#include <cstddef>
#include <map>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace parity::server {

class Clock {
 public:
  virtual ~Clock() = default;
  virtual absl::Time Now() const = 0;
  // With `mu` held, waits until `condition` holds or this clock reaches `deadline`; true if the
  // condition holds. Like absl::Mutex::AwaitWithDeadline, on this clock's time.
  virtual bool AwaitWithDeadline(absl::Mutex& mu, const absl::Condition& condition,
                                 absl::Time deadline) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) = 0;
};

class RealClock final : public Clock {
 public:
  absl::Time Now() const override { return absl::Now(); }
  bool AwaitWithDeadline(absl::Mutex& mu, const absl::Condition& condition,
                         absl::Time deadline) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) override {
    return mu.AwaitWithDeadline(condition, deadline);
  }
};

// Time moves only when a test calls Advance(); a waiter whose deadline has passed then wakes.
// Thread-safe. Lock order: a waiter's mutex before this clock's own. A waiter's mutex may be a
// local of the waiting call (a watch stream's sleep): AwaitWithDeadline does not return while an
// Advance still holds a pointer to it.
class FakeClock final : public Clock {
 public:
  explicit FakeClock(absl::Time start = absl::UnixEpoch() + absl::Hours(24 * 365 * 50))
      : now_(start) {}

  absl::Time Now() const override {
    absl::MutexLock lock(&mu_);
    return now_;
  }

  bool AwaitWithDeadline(absl::Mutex& mu, const absl::Condition& condition,
                         absl::Time deadline) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) override {
    {
      absl::MutexLock lock(&mu_);
      sleepers_.emplace(deadline, &mu);
    }
    auto woken = [&] { return condition.Eval() || Now() >= deadline; };
    mu.Await(absl::Condition(&woken));
    bool waking = false;
    {
      absl::MutexLock lock(&mu_);
      auto [first, last] = sleepers_.equal_range(deadline);
      for (auto it = first; it != last; ++it) {
        if (it->second == &mu) {
          sleepers_.erase(it);
          break;
        }
      }
      // The waiter saw the new time before an Advance that found it due had locked `mu`: let
      // that Advance finish with `mu` (unheld meanwhile) before the caller may destroy it.
      waking = waking_.count(&mu) > 0;
    }
    if (waking) {
      // Not under mu_: unlocking `mu` evaluates other waiters' conditions on this thread, and
      // theirs call Now().
      mu.Unlock();
      {
        absl::MutexLock lock(&mu_);
        auto done = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return waking_.count(&mu) == 0; };
        mu_.Await(absl::Condition(&done));
      }
      mu.Lock();
    }
    return condition.Eval();
  }

  // Moves time on by `d` and wakes the waiters whose deadline it reached.
  void Advance(absl::Duration d) {
    std::multimap<absl::Time, absl::Mutex*> due;
    {
      absl::MutexLock lock(&mu_);
      now_ += d;
      for (auto it = sleepers_.begin(); it != sleepers_.end() && it->first <= now_; ++it) {
        due.insert(*it);
        ++waking_[it->second];
      }
    }
    // Releasing a waiter's mutex makes it look at its condition again (and the new time).
    for (auto& [deadline, mu] : due) {
      mu->Lock();
      mu->Unlock();
    }
    absl::MutexLock lock(&mu_);
    for (auto& [deadline, mu] : due) {
      if (--waking_[mu] == 0) waking_.erase(mu);
    }
  }

  // Blocks until someone waits on this clock with exactly `deadline`: a test's way of knowing
  // that the code under test has gone to sleep until then.
  void AwaitSleeperUntil(absl::Time deadline) const {
    absl::MutexLock lock(&mu_);
    auto sleeping = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return sleepers_.count(deadline) > 0;
    };
    mu_.Await(absl::Condition(&sleeping));
  }

 private:
  mutable absl::Mutex mu_;
  absl::Time now_ ABSL_GUARDED_BY(mu_);
  mutable std::multimap<absl::Time, absl::Mutex*> sleepers_ ABSL_GUARDED_BY(mu_);
  // Waiters' mutexes an Advance found due and has not yet released: how many times each.
  std::map<absl::Mutex*, int> waking_ ABSL_GUARDED_BY(mu_);
};

}  // namespace parity::server
