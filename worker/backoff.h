// Exponential backoff with jitter, and the rule for which scheduler errors are worth retrying.
//
// Pure logic (no clock, no sleeping): callers ask for the next delay and wait however they wait,
// so the policy is tested directly. Limits: the jitter source is a seeded PRNG, not a secure one.
#pragma once

#include <cstdint>
#include <random>

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace parity::worker {

struct BackoffOptions {
  absl::Duration initial = absl::Milliseconds(200);
  absl::Duration max = absl::Seconds(10);
  double multiplier = 2.0;
  // Each delay is drawn uniformly from [d·(1−jitter), d·(1+jitter)], then capped at max.
  double jitter = 0.2;
};

// Not thread-safe: one instance per retry loop, used by the thread that runs that loop.
class Backoff {
 public:
  explicit Backoff(BackoffOptions options, uint64_t seed = std::random_device{}());

  // The delay to wait before the next attempt; grows geometrically up to options.max.
  absl::Duration NextDelay();
  // Back to the initial delay (after a success).
  void Reset();
  // Attempts since the last Reset (count).
  int attempts() const { return attempts_; }

 private:
  BackoffOptions options_;
  std::mt19937_64 rng_;
  absl::Duration current_;  // the un-jittered delay the next NextDelay() starts from
  int attempts_ = 0;
};

// Whether a failed scheduler call may succeed if simply tried again later: UNAVAILABLE (scheduler
// or database down), DEADLINE_EXCEEDED, ABORTED (lost a race), RESOURCE_EXHAUSTED (throttled), and
// UNKNOWN / INTERNAL (a connection reset surfaces as these). Everything else needs a decision.
bool IsRetryable(const absl::Status& status);

}  // namespace parity::worker
