#include "server/scheduling/retry_policy.h"

#include "gtest/gtest.h"

namespace parity::server {
namespace {

TEST(RetryPolicyTest, EachFailureClassHasItsPolicy) {
  RetryPolicy policy;
  policy.backoff_base = absl::Seconds(5);
  policy.backoff_max = absl::Seconds(30);
  RetryDecision d = DecideRetry(policy, v1::FAILURE_CLASS_PREEMPTED, {3, 3});
  EXPECT_EQ(d.next_state, v1::RUN_STATE_PENDING);
  EXPECT_EQ(d.next_attempt, 3u);
  EXPECT_EQ(d.delay, absl::ZeroDuration());

  d = DecideRetry(policy, v1::FAILURE_CLASS_INFRASTRUCTURE, {1, 3});
  EXPECT_EQ(d.next_state, v1::RUN_STATE_PENDING);
  EXPECT_EQ(d.next_attempt, 2u);
  EXPECT_EQ(d.delay, absl::Seconds(5));
  d = DecideRetry(policy, v1::FAILURE_CLASS_OUT_OF_MEMORY, {3, 5});
  EXPECT_EQ(d.delay, absl::Seconds(20));
  d = DecideRetry(policy, v1::FAILURE_CLASS_OUT_OF_MEMORY, {4, 9});
  EXPECT_EQ(d.delay, absl::Seconds(30)) << "backoff is capped";
  d = DecideRetry(policy, v1::FAILURE_CLASS_INFRASTRUCTURE, {3, 3});
  EXPECT_EQ(d.next_state, v1::RUN_STATE_FAILED);

  EXPECT_EQ(DecideRetry(policy, v1::FAILURE_CLASS_USER_ERROR, {1, 3}).next_state,
            v1::RUN_STATE_FAILED);
  EXPECT_EQ(DecideRetry(policy, v1::FAILURE_CLASS_LEASE_EXPIRED, {1, 3}).next_state,
            v1::RUN_STATE_FAILED);
}

// A hung engine is the machine's fault more often than the spec's: retried like a crash. A
// diverged run or a result that does not match its plan would come out the same way again.
TEST(RetryPolicyTest, HungIsRetriedDivergedAndInvalidResultsAreNot) {
  RetryPolicy policy;
  policy.backoff_base = absl::Seconds(5);
  policy.backoff_max = absl::Seconds(30);
  RetryDecision d = DecideRetry(policy, v1::FAILURE_CLASS_HUNG, {1, 3});
  EXPECT_EQ(d.next_state, v1::RUN_STATE_PENDING) << "HUNG should be retried";
  EXPECT_EQ(d.next_attempt, 2u);
  EXPECT_EQ(d.delay, absl::Seconds(5));
  EXPECT_EQ(DecideRetry(policy, v1::FAILURE_CLASS_HUNG, {3, 3}).next_state, v1::RUN_STATE_FAILED)
      << "HUNG spends attempts like INFRASTRUCTURE";
  EXPECT_EQ(DecideRetry(policy, v1::FAILURE_CLASS_DIVERGED, {1, 3}).next_state,
            v1::RUN_STATE_FAILED)
      << "a diverged run must not be retried";
  EXPECT_EQ(DecideRetry(policy, v1::FAILURE_CLASS_INVALID_RESULT, {1, 3}).next_state,
            v1::RUN_STATE_FAILED)
      << "an invalid result must not be retried";
  EXPECT_EQ(DecideRetry(policy, v1::FAILURE_CLASS_DATA_MISMATCH, {1, 3}).next_state,
            v1::RUN_STATE_FAILED)
      << "a worker's copy of the dataset does not change on retry";
}

// Preemptions are free up to the cap, with a backoff from the second on; past the cap each spends
// an attempt, so an engine that keeps exiting "preempted" ends FAILED instead of cycling forever.
TEST(RetryPolicyTest, PreemptionsHaveTheirOwnCapAndBackoff) {
  RetryPolicy policy;
  policy.max_preemptions = 3;
  policy.preemption_backoff_base = absl::Seconds(2);
  policy.preemption_backoff_max = absl::Seconds(5);
  RetryDecision d = DecideRetry(policy, v1::FAILURE_CLASS_PREEMPTED, {1, 3, 0});
  EXPECT_EQ(d.next_state, v1::RUN_STATE_PENDING);
  EXPECT_EQ(d.next_attempt, 1u) << "a preemption under the cap spends no attempt";
  EXPECT_EQ(d.next_preemptions, 1u);
  EXPECT_EQ(d.delay, absl::ZeroDuration()) << "the first preemption is requeued at once";
  d = DecideRetry(policy, v1::FAILURE_CLASS_PREEMPTED, {1, 3, 1});
  EXPECT_EQ(d.delay, absl::Seconds(2)) << "the second waits the base";
  d = DecideRetry(policy, v1::FAILURE_CLASS_PREEMPTED, {1, 3, 2});
  EXPECT_EQ(d.delay, absl::Seconds(4));
  EXPECT_EQ(d.next_attempt, 1u);
  EXPECT_EQ(d.next_preemptions, 3u);

  d = DecideRetry(policy, v1::FAILURE_CLASS_PREEMPTED, {1, 3, 3});
  EXPECT_EQ(d.next_state, v1::RUN_STATE_PENDING);
  EXPECT_EQ(d.next_attempt, 2u) << "past the cap a preemption spends an attempt";
  EXPECT_EQ(d.next_preemptions, 4u);
  d = DecideRetry(policy, v1::FAILURE_CLASS_PREEMPTED, {3, 3, 5});
  EXPECT_EQ(d.next_state, v1::RUN_STATE_FAILED)
      << "past the cap, the last attempt's preemption fails the run";

  d = DecideRetry(policy, v1::FAILURE_CLASS_INFRASTRUCTURE, {1, 3, 2});
  EXPECT_EQ(d.next_preemptions, 2u) << "other failures leave the preemption count alone";
}

}  // namespace
}  // namespace parity::server
