// What happens to a run when an attempt fails: the retry policy of each failure class, as a pure
// function. The scheduler decides each failed completion with it before the completion goes to
// the store, which applies the decision (RetryDecision, server/store/run_store.h) as told.
//   PREEMPTED                      back to PENDING at once, the attempt is not spent;
//   INFRASTRUCTURE, OUT_OF_MEMORY, back to PENDING with attempt + 1 and a backoff delay, until
//   HUNG                           max_attempts, then FAILED;
//   USER_ERROR, DIVERGED,          FAILED, never retried: the same spec on the same engine would
//   INVALID_RESULT, anything else  fail the same way.
#pragma once

#include <algorithm>
#include <cstdint>

#include "absl/time/time.h"
#include "core/backoff.h"
#include "parity/v1/run.pb.h"
#include "server/store/run_store.h"

namespace parity::server {

struct RetryPolicy {
  // Delay before a retried run may be leased again: base · 2^(attempt−1), at most max.
  absl::Duration backoff_base = absl::Seconds(5);
  absl::Duration backoff_max = absl::Minutes(5);
};

inline RetryDecision DecideRetry(const RetryPolicy& policy, v1::FailureClass failure_class,
                                 uint32_t attempt, uint32_t max_attempts) {
  switch (failure_class) {
    case v1::FAILURE_CLASS_PREEMPTED:
      return {v1::RUN_STATE_PENDING, attempt, absl::ZeroDuration()};
    case v1::FAILURE_CLASS_INFRASTRUCTURE:
    case v1::FAILURE_CLASS_OUT_OF_MEMORY:
    case v1::FAILURE_CLASS_HUNG: {
      if (attempt >= max_attempts) return {v1::RUN_STATE_FAILED, attempt, absl::ZeroDuration()};
      const absl::Duration delay = core::BackoffDelay(
          {.initial = policy.backoff_base, .max = policy.backoff_max, .multiplier = 2, .jitter = 0},
          static_cast<int>(std::min<uint32_t>(attempt, 64)));
      return {v1::RUN_STATE_PENDING, attempt + 1, delay};
    }
    default:
      return {v1::RUN_STATE_FAILED, attempt, absl::ZeroDuration()};
  }
}

}  // namespace parity::server
