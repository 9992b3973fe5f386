#include "core/backoff.h"

#include <algorithm>

namespace parity::core {

absl::Duration BackoffDelay(const BackoffOptions& options, int attempt) {
  absl::Duration delay = std::min(options.initial, options.max);
  // Multiply step by step and stop at the cap, so a large attempt cannot overflow.
  for (int i = 1; i < attempt && delay < options.max; ++i) {
    delay = std::min(delay * options.multiplier, options.max);
  }
  return delay;
}

Backoff::Backoff(BackoffOptions options, uint64_t seed) : options_(options), rng_(seed) {}

absl::Duration Backoff::NextDelay() {
  ++attempts_;
  const double jitter = std::clamp(options_.jitter, 0.0, 1.0);
  std::uniform_real_distribution<double> factor(1.0 - jitter, 1.0 + jitter);
  return std::min(BackoffDelay(options_, attempts_) * factor(rng_), options_.max);
}

void Backoff::Reset() { attempts_ = 0; }

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

}  // namespace parity::core
