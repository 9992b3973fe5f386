// LeaseRun's request_id and retry (issue #25): a call whose answer was lost, repeated with the
// same request_id and retry = true, gets the same lease back — run, epoch and lease secret — with
// its expiry renewed, instead of a second run while the first waits out its TTL. On the memory
// store and the fake clock (scheduler_logic_fixture.h); what each store does with a retry is the
// store contract's (lease_retry_contract_test.h).
#include <string>
#include <vector>

#include "core/field_violation.h"
#include "core/proto_time.h"
#include "gmock/gmock.h"
#include "tests/scheduler/scheduler_logic_fixture.h"

namespace parity::server::testing {
namespace {

using ::testing::ElementsAre;

class LeaseRetryTest : public SchedulerLogicTest {
 protected:
  absl::StatusOr<v1::LeaseRunResponse> Lease(const std::string& worker,
                                             const std::string& request_id, bool retry) {
    v1::LeaseRunRequest request = LeaseRequestFor(worker);
    request.set_request_id(request_id);
    request.set_retry(retry);
    return scheduler_->LeaseRun(request, absl::InfiniteFuture(), {});
  }
  static std::vector<std::string> FieldsOf(const absl::Status& status) {
    std::vector<std::string> fields;
    for (const core::FieldViolation& v : core::FieldViolationsOf(status)) fields.push_back(v.field);
    return fields;
  }
};

TEST_F(LeaseRetryTest, ARetryGetsTheSameLeaseAndSecretAgain) {
  const v1::SubmitSweepResponse submitted = Submit(MakeSweepSpec("retry", 2));
  const std::string worker = Register();
  absl::StatusOr<v1::LeaseRunResponse> lost = Lease(worker, "attempt-1", false);
  ASSERT_TRUE(lost.ok() && lost->has_lease()) << lost.status();
  clock_.Advance(absl::Seconds(10));  // the worker's backoff before it asks again

  absl::StatusOr<v1::LeaseRunResponse> again = Lease(worker, "attempt-1", true);
  ASSERT_TRUE(again.ok() && again->has_lease()) << again.status();
  EXPECT_EQ(again->run().run_id(), lost->run().run_id());
  EXPECT_EQ(again->lease().lease_epoch(), lost->lease().lease_epoch());
  EXPECT_EQ(again->lease_secret(), lost->lease_secret()) << "the secret of the same lease";
  EXPECT_EQ(FromProtoTime(again->lease().expire_time()), clock_.Now() + options_.lease_ttl)
      << "renewed from the retry";

  // The secret answered again is the lease's: the worker starts the run with it.
  v1::HeartbeatRequest heartbeat;
  heartbeat.set_worker_id(worker);
  heartbeat.set_run_id(again->run().run_id());
  heartbeat.set_lease_epoch(again->lease().lease_epoch());
  heartbeat.set_lease_secret(again->lease_secret());
  ASSERT_TRUE(scheduler_->Heartbeat(heartbeat).ok());

  // Once started, the same retry is no longer answered with it: the next run is leased.
  absl::StatusOr<v1::LeaseRunResponse> later = Lease(worker, "attempt-1", true);
  ASSERT_TRUE(later.ok() && later->has_lease()) << later.status();
  EXPECT_EQ(later->run().run_id(), submitted.run_ids(1));
  EXPECT_NE(later->lease_secret(), lost->lease_secret());
  // Nothing lapses and nothing is charged: both runs are held, at their first attempt.
  for (const v1::Run& run : RunsOf(submitted.sweep().sweep_id())) {
    EXPECT_EQ(run.attempt(), 1u) << run.run_id();
    EXPECT_NE(run.state(), v1::RUN_STATE_PENDING) << run.run_id();
  }
}

TEST_F(LeaseRetryTest, ARetryWhoseLeaseLapsedLeasesAsUsual) {
  const v1::SubmitSweepResponse submitted = Submit(MakeSweepSpec("retry-lapsed", 2));
  const std::string worker = Register();
  absl::StatusOr<v1::LeaseRunResponse> lost = Lease(worker, "attempt-1", false);
  ASSERT_TRUE(lost.ok() && lost->has_lease()) << lost.status();
  clock_.Advance(options_.lease_ttl + absl::Seconds(1));
  absl::StatusOr<v1::LeaseRunResponse> retried = Lease(worker, "attempt-1", true);
  ASSERT_TRUE(retried.ok() && retried->has_lease()) << retried.status();
  EXPECT_EQ(retried->run().run_id(), submitted.run_ids(1)) << "the lapsed lease is the reaper's";
}

TEST_F(LeaseRetryTest, ABadRequestIdOrARetryWithoutOneIsInvalid) {
  const std::string worker = Register();
  const absl::Status too_long = Lease(worker, std::string(65, 'a'), false).status();
  EXPECT_EQ(too_long.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(FieldsOf(too_long), ElementsAre("request_id"));
  EXPECT_THAT(std::string(too_long.message()), ::testing::HasSubstr("at most 64"));

  const absl::Status bad_text = Lease(worker, "attempt 1/x", true).status();
  EXPECT_EQ(bad_text.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(FieldsOf(bad_text), ElementsAre("request_id"));
  EXPECT_THAT(std::string(bad_text.message()), ::testing::HasSubstr("[A-Za-z0-9_-]"));

  const absl::Status no_id = Lease(worker, "", true).status();
  EXPECT_EQ(no_id.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(FieldsOf(no_id), ElementsAre("retry"));

  EXPECT_TRUE(Lease(worker, std::string(64, 'a'), false).ok()) << "64 characters are allowed";
  EXPECT_TRUE(Lease(worker, "", false).ok()) << "no id: leases as before";
}

}  // namespace
}  // namespace parity::server::testing
