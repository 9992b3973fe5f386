#include "worker/backoff.h"

#include "gtest/gtest.h"

namespace parity::worker {
namespace {

TEST(BackoffTest, GrowsGeometricallyUpToTheCap) {
  Backoff b({.initial = absl::Milliseconds(100),
             .max = absl::Milliseconds(700),
             .multiplier = 2.0,
             .jitter = 0});
  EXPECT_EQ(b.NextDelay(), absl::Milliseconds(100));
  EXPECT_EQ(b.NextDelay(), absl::Milliseconds(200));
  EXPECT_EQ(b.NextDelay(), absl::Milliseconds(400));
  EXPECT_EQ(b.NextDelay(), absl::Milliseconds(700)) << "capped at max";
  EXPECT_EQ(b.NextDelay(), absl::Milliseconds(700));
  EXPECT_EQ(b.attempts(), 5);
}

TEST(BackoffTest, ResetStartsOver) {
  Backoff b(
      {.initial = absl::Milliseconds(50), .max = absl::Seconds(5), .multiplier = 3.0, .jitter = 0});
  b.NextDelay();
  b.NextDelay();
  b.Reset();
  EXPECT_EQ(b.attempts(), 0);
  EXPECT_EQ(b.NextDelay(), absl::Milliseconds(50));
}

TEST(BackoffTest, JitterStaysWithinItsBandAndVaries) {
  Backoff b(
      {.initial = absl::Seconds(1), .max = absl::Seconds(1), .multiplier = 2.0, .jitter = 0.25},
      /*seed=*/42);
  absl::Duration lo = absl::InfiniteDuration(), hi = absl::ZeroDuration();
  for (int i = 0; i < 200; ++i) {
    absl::Duration d = b.NextDelay();
    EXPECT_GE(d, absl::Milliseconds(750));
    EXPECT_LE(d, absl::Seconds(1)) << "jitter never exceeds max";
    lo = std::min(lo, d);
    hi = std::max(hi, d);
  }
  EXPECT_LT(lo, absl::Milliseconds(900)) << "jitter should spread the delays";
}

TEST(BackoffTest, RetryableCodes) {
  EXPECT_TRUE(IsRetryable(absl::UnavailableError("")));
  EXPECT_TRUE(IsRetryable(absl::DeadlineExceededError("")));
  EXPECT_TRUE(IsRetryable(absl::AbortedError("")));
  EXPECT_FALSE(IsRetryable(absl::FailedPreconditionError(""))) << "a lost lease is not retried";
  EXPECT_FALSE(IsRetryable(absl::NotFoundError("")));
  EXPECT_FALSE(IsRetryable(absl::InvalidArgumentError("")));
  EXPECT_FALSE(IsRetryable(absl::OkStatus()));
}

}  // namespace
}  // namespace parity::worker
