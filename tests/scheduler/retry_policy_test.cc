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

}  // namespace
}  // namespace parity::server
