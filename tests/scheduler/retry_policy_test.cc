#include "server/scheduling/retry_policy.h"

#include "gtest/gtest.h"

namespace parity::server {
namespace {

TEST(RetryPolicyTest, EachFailureClassHasItsPolicy) {
  const RetryPolicy policy{absl::Seconds(5), absl::Seconds(30)};
  RetryDecision d = DecideRetry(policy, v1::FAILURE_CLASS_PREEMPTED, 3, 3);
  EXPECT_EQ(d.next_state, v1::RUN_STATE_PENDING);
  EXPECT_EQ(d.next_attempt, 3u);
  EXPECT_EQ(d.delay, absl::ZeroDuration());

  d = DecideRetry(policy, v1::FAILURE_CLASS_INFRASTRUCTURE, 1, 3);
  EXPECT_EQ(d.next_state, v1::RUN_STATE_PENDING);
  EXPECT_EQ(d.next_attempt, 2u);
  EXPECT_EQ(d.delay, absl::Seconds(5));
  d = DecideRetry(policy, v1::FAILURE_CLASS_OUT_OF_MEMORY, 3, 5);
  EXPECT_EQ(d.delay, absl::Seconds(20));
  d = DecideRetry(policy, v1::FAILURE_CLASS_OUT_OF_MEMORY, 4, 9);
  EXPECT_EQ(d.delay, absl::Seconds(30)) << "backoff is capped";
  d = DecideRetry(policy, v1::FAILURE_CLASS_INFRASTRUCTURE, 3, 3);
  EXPECT_EQ(d.next_state, v1::RUN_STATE_FAILED);

  EXPECT_EQ(DecideRetry(policy, v1::FAILURE_CLASS_USER_ERROR, 1, 3).next_state,
            v1::RUN_STATE_FAILED);
  EXPECT_EQ(DecideRetry(policy, v1::FAILURE_CLASS_LEASE_EXPIRED, 1, 3).next_state,
            v1::RUN_STATE_FAILED);
}

// A hung engine is the machine's fault more often than the spec's: retried like a crash. A
// diverged run or a result that does not match its plan would come out the same way again.
TEST(RetryPolicyTest, HungIsRetriedDivergedAndInvalidResultsAreNot) {
  const RetryPolicy policy{absl::Seconds(5), absl::Seconds(30)};
  RetryDecision d = DecideRetry(policy, v1::FAILURE_CLASS_HUNG, 1, 3);
  EXPECT_EQ(d.next_state, v1::RUN_STATE_PENDING) << "HUNG should be retried";
  EXPECT_EQ(d.next_attempt, 2u);
  EXPECT_EQ(d.delay, absl::Seconds(5));
  EXPECT_EQ(DecideRetry(policy, v1::FAILURE_CLASS_HUNG, 3, 3).next_state, v1::RUN_STATE_FAILED)
      << "HUNG spends attempts like INFRASTRUCTURE";
  EXPECT_EQ(DecideRetry(policy, v1::FAILURE_CLASS_DIVERGED, 1, 3).next_state, v1::RUN_STATE_FAILED)
      << "a diverged run must not be retried";
  EXPECT_EQ(DecideRetry(policy, v1::FAILURE_CLASS_INVALID_RESULT, 1, 3).next_state,
            v1::RUN_STATE_FAILED)
      << "an invalid result must not be retried";
}

}  // namespace
}  // namespace parity::server
