#include "core/backoff.h"

#include "gtest/gtest.h"

namespace parity::core {
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

TEST(BackoffTest, TheSameSeedGivesTheSameDelays) {
  const BackoffOptions options{.initial = absl::Milliseconds(100), .max = absl::Seconds(60)};
  Backoff a(options, /*seed=*/7), b(options, /*seed=*/7), c(options, /*seed=*/8);
  bool differs = false;
  for (int i = 0; i < 10; ++i) {
    const absl::Duration d = a.NextDelay();
    EXPECT_EQ(d, b.NextDelay()) << "attempt " << i + 1 << ": same seed, same jitter";
    differs |= d != c.NextDelay();
  }
  EXPECT_TRUE(differs) << "another seed should jitter differently";
}

TEST(BackoffDelayTest, IsInitialTimesMultiplierToTheAttemptMinusOneCapped) {
  const BackoffOptions options{.initial = absl::Seconds(5), .max = absl::Minutes(5)};
  EXPECT_EQ(BackoffDelay(options, 0), absl::Seconds(5)) << "attempts below 1 count as the first";
  EXPECT_EQ(BackoffDelay(options, 1), absl::Seconds(5));
  EXPECT_EQ(BackoffDelay(options, 2), absl::Seconds(10));
  EXPECT_EQ(BackoffDelay(options, 7), absl::Seconds(300)) << "5·2^6 = 320 s, capped at 300 s";
  EXPECT_EQ(BackoffDelay(options, 1'000'000), absl::Minutes(5)) << "no overflow for huge attempts";
  EXPECT_EQ(
      BackoffDelay({.initial = absl::Seconds(1), .max = absl::Seconds(100), .multiplier = 3}, 4),
      absl::Seconds(27));
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
}  // namespace parity::core
