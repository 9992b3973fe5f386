// What happens to a run when an attempt fails: the retry policy of each failure class, as a pure
// function. The scheduler decides each failed completion with it before the completion goes to
// the store, which applies the decision (RetryDecision, server/store/run_queue.h) as told.
//   PREEMPTED                      back to PENDING with the attempt not spent, after a backoff
//                                  that grows with the run's preemptions (the first is free);
//                                  past max_preemptions each further one spends an attempt, so
//                                  an engine that keeps exiting "preempted" cannot cycle forever;
//   INFRASTRUCTURE, OUT_OF_MEMORY, back to PENDING with attempt + 1 and a backoff delay, until
//   HUNG                           max_attempts, then FAILED;
//   USER_ERROR, DIVERGED,          FAILED, never retried: the same spec on the same engine would
//   INVALID_RESULT, DATA_MISMATCH, fail the same way (a worker's copy of the dataset stays what it
//   anything else                  is until someone re-copies it).
#pragma once

#include <algorithm>
#include <cstdint>

#include "absl/time/time.h"
#include "core/backoff.h"
#include "parity/v1/run.pb.h"
#include "server/store/run_queue.h"

namespace parity::server {

struct RetryPolicy {
  // Delay before a retried run may be leased again: base · 2^(attempt−1), at most max.
  absl::Duration backoff_base = absl::Seconds(5);
  absl::Duration backoff_max = absl::Minutes(5);
  // Preemptions a run may have without spending attempts (count). A cluster that reclaims a node
  // now and then preempts a run a few times in a study; 20 is a run that cannot keep a worker.
  uint32_t max_preemptions = 20;
  // Delay after the run's p-th preemption (p ≥ 2): base · 2^(p−2), at most max; the first is
  // requeued at once, since a worker's orderly shutdown should not delay its runs.
  absl::Duration preemption_backoff_base = absl::Seconds(2);
  absl::Duration preemption_backoff_max = absl::Minutes(2);
};

// Where the run stands when its attempt fails.
struct AttemptCounts {
  uint32_t attempt = 1;       // the failed attempt, from 1
  uint32_t max_attempts = 1;  // attempts allowed
  uint32_t preemptions = 0;   // preemptions before this failure
};

inline RetryDecision DecideRetry(const RetryPolicy& policy, v1::FailureClass failure_class,
                                 const AttemptCounts& run) {
  const auto spend_attempt = [&](uint32_t preemptions) -> RetryDecision {
    if (run.attempt >= run.max_attempts) {
      return {v1::RUN_STATE_FAILED, run.attempt, absl::ZeroDuration(), preemptions};
    }
    const absl::Duration delay = core::BackoffDelay(
        {.initial = policy.backoff_base, .max = policy.backoff_max, .multiplier = 2, .jitter = 0},
        static_cast<int>(std::min<uint32_t>(run.attempt, 64)));
    return {v1::RUN_STATE_PENDING, run.attempt + 1, delay, preemptions};
  };
  switch (failure_class) {
    case v1::FAILURE_CLASS_PREEMPTED: {
      const uint32_t preemptions = run.preemptions + 1;
      if (preemptions > policy.max_preemptions) return spend_attempt(preemptions);
      absl::Duration delay = absl::ZeroDuration();
      if (preemptions >= 2) {
        delay = core::BackoffDelay({.initial = policy.preemption_backoff_base,
                                    .max = policy.preemption_backoff_max,
                                    .multiplier = 2,
                                    .jitter = 0},
                                   static_cast<int>(std::min<uint32_t>(preemptions - 1, 64)));
      }
      return {v1::RUN_STATE_PENDING, run.attempt, delay, preemptions};
    }
    case v1::FAILURE_CLASS_INFRASTRUCTURE:
    case v1::FAILURE_CLASS_OUT_OF_MEMORY:
    case v1::FAILURE_CLASS_HUNG:
      return spend_attempt(run.preemptions);
    default:
      return {v1::RUN_STATE_FAILED, run.attempt, absl::ZeroDuration(), run.preemptions};
  }
}

}  // namespace parity::server
