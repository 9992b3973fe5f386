// A lease whose answer was lost is given back to its worker, not orphaned (issue #25): a
// LeaseRequest with `retry` set gets the run its request_id was granted — same run, same epoch,
// expiry renewed, nothing new leased, no second 'leased' event — while that run is LEASED to the
// same worker and unexpired; in every other case it leases as usual. On the store contract's
// harness (store_contract_test.h); both contract binaries instantiate it beside the others.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "server/store/read_models.h"
#include "tests/scheduler/store_contract_test.h"

namespace parity::server::testing {

template <typename Harness>
class LeaseRetryContractTest : public StoreContractTest<Harness> {
 protected:
  static LeaseRequest Attempt(const std::string& worker, const std::string& request_id, bool retry,
                              absl::Duration ttl = absl::Seconds(60)) {
    LeaseRequest request = StoreContractTest<Harness>::Cpu(worker, ttl);
    request.request_id = request_id;
    request.retry = retry;
    return request;
  }
  // The store's answer to one request: a run, or nullopt when it found no work.
  std::optional<LeasedRun> Ask(const LeaseRequest& request) {
    absl::StatusOr<std::optional<LeasedRun>> leased = this->queue().LeaseNextRun(request);
    EXPECT_TRUE(leased.ok()) << leased.status();
    return leased.ok() ? *leased : std::nullopt;
  }
  int LeasedEvents(const std::string& run_id) {
    absl::StatusOr<std::vector<RunEvent>> events =
        this->harness_.reads().ListRunEvents(run_id, 0, 100);
    EXPECT_TRUE(events.ok()) << events.status();
    int leased = 0;
    for (const RunEvent& event : events.ok() ? *events : std::vector<RunEvent>()) {
      leased += event.to_state == v1::RUN_STATE_LEASED;
    }
    return leased;
  }
};

TYPED_TEST_SUITE_P(LeaseRetryContractTest);

TYPED_TEST_P(LeaseRetryContractTest, ARetryGetsTheSameLeaseAgainAndLeasesNothingNew) {
  const CreatedSweep sweep = this->Sweep("retry-same", 2);
  const std::string worker = this->Worker();
  const std::optional<LeasedRun> first = this->Ask(this->Attempt(worker, "attempt-1", false));
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(first->run.run_id(), sweep.run_ids[0]);
  this->harness_.LetTimePass(absl::Milliseconds(50));

  const std::optional<LeasedRun> again = this->Ask(this->Attempt(worker, "attempt-1", true));
  ASSERT_TRUE(again.has_value()) << "the lost answer's lease is given back";
  EXPECT_TRUE(again->answered_again);
  EXPECT_EQ(again->run.run_id(), first->run.run_id());
  EXPECT_EQ(again->lease.lease_epoch(), first->lease.lease_epoch()) << "the same lease";
  EXPECT_EQ(again->run.state(), v1::RUN_STATE_LEASED);
  EXPECT_EQ(again->lease.worker_id(), worker);
  EXPECT_EQ(again->lease.device_indices_size(), first->lease.device_indices_size());
  EXPECT_GT(
      again->lease.expire_time().seconds() * 1'000'000'000LL + again->lease.expire_time().nanos(),
      first->lease.expire_time().seconds() * 1'000'000'000LL + first->lease.expire_time().nanos())
      << "the expiry is renewed to now + ttl";
  EXPECT_EQ(this->LeasedEvents(first->run.run_id()), 1) << "one lease, recorded once";

  // Nothing else was leased: the second run is still there for the next attempt.
  const std::optional<LeasedRun> next = this->Ask(this->Attempt(worker, "attempt-2", false));
  ASSERT_TRUE(next.has_value());
  EXPECT_EQ(next->run.run_id(), sweep.run_ids[1]);
  EXPECT_FALSE(next->answered_again);
}

TYPED_TEST_P(LeaseRetryContractTest, ARetryAfterAHeartbeatDoesNotGetTheStartedRunAgain) {
  const CreatedSweep sweep = this->Sweep("retry-started", 2);
  const std::string worker = this->Worker();
  const std::optional<LeasedRun> first = this->Ask(this->Attempt(worker, "attempt-1", false));
  ASSERT_TRUE(first.has_value());
  const HeartbeatUpdate beat{worker, first->run.run_id(), first->lease.lease_epoch(),
                             1,      std::nullopt,        absl::Seconds(60)};
  ASSERT_TRUE(this->queue().Heartbeat(beat).ok()) << "the worker got the answer and started";

  const std::optional<LeasedRun> retried = this->Ask(this->Attempt(worker, "attempt-1", true));
  ASSERT_TRUE(retried.has_value()) << "new work, as any lease";
  EXPECT_EQ(retried->run.run_id(), sweep.run_ids[1]);
  EXPECT_FALSE(retried->answered_again);
  absl::StatusOr<v1::Run> started = this->catalog().GetRun(first->run.run_id());
  ASSERT_TRUE(started.ok()) << started.status();
  EXPECT_EQ(started->state(), v1::RUN_STATE_RUNNING);
  EXPECT_EQ(started->lease().lease_epoch(), first->lease.lease_epoch());
}

TYPED_TEST_P(LeaseRetryContractTest, ARetryOfAnotherWorkerDoesNotGetTheLease) {
  const CreatedSweep sweep = this->Sweep("retry-other-worker", 1);
  const std::string holder = this->Worker();
  const std::string other = this->Worker();
  const std::optional<LeasedRun> first = this->Ask(this->Attempt(holder, "attempt-1", false));
  ASSERT_TRUE(first.has_value());
  EXPECT_FALSE(this->Ask(this->Attempt(other, "attempt-1", true)).has_value())
      << "the request id is the holder's: another worker finds no work";
  absl::StatusOr<v1::Run> run = this->catalog().GetRun(sweep.run_ids[0]);
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_EQ(run->lease().worker_id(), holder);
  EXPECT_EQ(run->lease().lease_epoch(), first->lease.lease_epoch());
}

TYPED_TEST_P(LeaseRetryContractTest, ARetryAfterTheLeaseLapsedGetsNothingOld) {
  this->Sweep("retry-lapsed", 1);
  const std::string worker = this->Worker();
  ASSERT_TRUE(
      this->Ask(this->Attempt(worker, "attempt-1", false, absl::Milliseconds(200))).has_value());
  this->harness_.LetTimePass(absl::Milliseconds(400));  // lapsed, not yet reaped
  EXPECT_FALSE(this->Ask(this->Attempt(worker, "attempt-1", true)).has_value())
      << "a lapsed lease is the reaper's, not the retry's";
}

TYPED_TEST_P(LeaseRetryContractTest, AnAttemptWithoutRetryLeasesNewWorkWhateverItsId) {
  const CreatedSweep sweep = this->Sweep("retry-not-set", 2);
  const std::string worker = this->Worker();
  const std::optional<LeasedRun> first = this->Ask(this->Attempt(worker, "attempt-1", false));
  ASSERT_TRUE(first.has_value());
  const std::optional<LeasedRun> second = this->Ask(this->Attempt(worker, "attempt-1", false));
  ASSERT_TRUE(second.has_value());
  EXPECT_EQ(second->run.run_id(), sweep.run_ids[1]) << "no retry flag, no lookup";
  EXPECT_FALSE(second->answered_again);
  // A retry of an id that got nothing leases as usual too.
  EXPECT_FALSE(this->Ask(this->Attempt(worker, "never-answered", true)).has_value());
}

TYPED_TEST_P(LeaseRetryContractTest, ABatchMixesRetriesAndNewLeases) {
  const CreatedSweep sweep = this->Sweep("retry-batch", 4);
  const std::string a = this->Worker();
  const std::string b = this->Worker();
  const std::optional<LeasedRun> lost = this->Ask(this->Attempt(a, "a-1", false));
  ASSERT_TRUE(lost.has_value());
  ASSERT_EQ(lost->run.run_id(), sweep.run_ids[0]);

  const LeaseRequest b_new = this->Attempt(b, "b-1", false);
  const LeaseRequest a_retry = this->Attempt(a, "a-1", true);
  const LeaseRequest a_retry_nothing = this->Attempt(a, "a-0", true);
  const std::vector<absl::StatusOr<std::optional<LeasedRun>>> results =
      this->queue().LeaseNextRuns({&b_new, &a_retry, &a_retry_nothing});
  ASSERT_EQ(results.size(), 3u);
  for (const auto& result : results) {
    ASSERT_TRUE(result.ok()) << result.status();
    ASSERT_TRUE(result->has_value());
  }
  EXPECT_EQ((*results[0])->run.run_id(), sweep.run_ids[1]);
  EXPECT_FALSE((*results[0])->answered_again);
  EXPECT_EQ((*results[1])->run.run_id(), sweep.run_ids[0]) << "the retry's own lease";
  EXPECT_EQ((*results[1])->lease.lease_epoch(), lost->lease.lease_epoch());
  EXPECT_TRUE((*results[1])->answered_again);
  EXPECT_EQ((*results[2])->run.run_id(), sweep.run_ids[2]) << "a retry that found none leases";
  EXPECT_FALSE((*results[2])->answered_again);
  const std::optional<LeasedRun> last = this->Ask(this->Attempt(b, "b-2", false));
  ASSERT_TRUE(last.has_value());
  EXPECT_EQ(last->run.run_id(), sweep.run_ids[3]) << "the batch leased two runs, not three";
}

REGISTER_TYPED_TEST_SUITE_P(LeaseRetryContractTest, ARetryGetsTheSameLeaseAgainAndLeasesNothingNew,
                            ARetryAfterAHeartbeatDoesNotGetTheStartedRunAgain,
                            ARetryOfAnotherWorkerDoesNotGetTheLease,
                            ARetryAfterTheLeaseLapsedGetsNothingOld,
                            AnAttemptWithoutRetryLeasesNewWorkWhateverItsId,
                            ABatchMixesRetriesAndNewLeases);

}  // namespace parity::server::testing
