// Exponential backoff with seeded jitter, and the rule for which errors are worth retrying. The one
// copy: the worker's retry loops, the scheduler's retry delay of a failed run
// (server/retry_policy.h) and the CLI's reconnects all use it.
//
// Pure logic (no clock, no sleeping): callers ask for the next delay and wait however they wait,
// so the policy is tested directly. Limits: the jitter source is a seeded PRNG, not a secure one.
#pragma once

#include <cstdint>
#include <random>

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace parity::core {

struct BackoffOptions {
  absl::Duration initial = absl::Milliseconds(200);
  absl::Duration max = absl::Seconds(10);
  double multiplier = 2.0;
  // Each delay is drawn uniformly from [d·(1−jitter), d·(1+jitter)], then capped at max.
  double jitter = 0.2;
};

// The un-jittered delay before retry number `attempt` (counted from 1; below 1 counts as 1):
// initial·multiplier^(attempt−1), at most max.
absl::Duration BackoffDelay(const BackoffOptions& options, int attempt);

// Not thread-safe: one instance per retry loop, used by the thread that runs that loop.
class Backoff {
 public:
  explicit Backoff(BackoffOptions options, uint64_t seed = std::random_device{}());

  // The delay to wait before the next attempt: BackoffDelay of the attempt, jittered, at most max.
  absl::Duration NextDelay();
  // Back to the initial delay (after a success).
  void Reset();
  // Attempts since the last Reset (count).
  int attempts() const { return attempts_; }

 private:
  BackoffOptions options_;
  std::mt19937_64 rng_;
  int attempts_ = 0;
};

// Whether a failed call may succeed if simply tried again later: UNAVAILABLE (server or database
// down), DEADLINE_EXCEEDED, ABORTED (lost a race), RESOURCE_EXHAUSTED (throttled), and UNKNOWN /
// INTERNAL (a connection reset surfaces as these). Everything else needs a decision.
bool IsRetryable(const absl::Status& status);

}  // namespace parity::core
