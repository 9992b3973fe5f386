#include "worker/backoff.h"

#include <algorithm>

namespace parity::worker {

Backoff::Backoff(BackoffOptions options, uint64_t seed)
    : options_(options), rng_(seed), current_(options.initial) {}

absl::Duration Backoff::NextDelay() {
  ++attempts_;
  const double jitter = std::clamp(options_.jitter, 0.0, 1.0);
  std::uniform_real_distribution<double> factor(1.0 - jitter, 1.0 + jitter);
  absl::Duration delay = std::min(current_ * factor(rng_), options_.max);
  current_ = std::min(current_ * options_.multiplier, options_.max);
  return delay;
}

void Backoff::Reset() {
  attempts_ = 0;
  current_ = options_.initial;
}

bool IsRetryable(const absl::Status& status) {
  switch (status.code()) {
    case absl::StatusCode::kUnavailable:
    case absl::StatusCode::kDeadlineExceeded:
    case absl::StatusCode::kAborted:
    case absl::StatusCode::kResourceExhausted:
    case absl::StatusCode::kUnknown:
    case absl::StatusCode::kInternal:
      return true;
    default:
      return false;
  }
}

}  // namespace parity::worker
