// What a caller may not send or queue: a worker's registration, heartbeat and failure past
// their size limits or an enum's range, and a submission past its owner's queued-run limit, each
// refused with the field named and nothing stored. On the memory store (scheduler_logic_fixture.h).
#include <string>
#include <vector>

#include "core/field_violation.h"
#include "gmock/gmock.h"
#include "server/store/memory/memory_run_store.h"
#include "tests/scheduler/scheduler_logic_fixture.h"

namespace parity::server::testing {
namespace {

std::vector<std::string> FieldsOf(const absl::Status& status) {
  std::vector<std::string> fields;
  for (const core::FieldViolation& v : core::FieldViolationsOf(status)) fields.push_back(v.field);
  return fields;
}

TEST_F(SchedulerLogicTest,
       WhatAWorkerSendsPastItsLimitsIsInvalidArgumentNamingTheFieldAndStoresNothing) {
  v1::RegisterWorkerRequest registration;
  registration.set_hostname("limits");
  *registration.add_devices() = CpuDevice();
  for (int i = 0; i < 33; ++i) registration.mutable_labels()->insert({absl::StrCat("k", i), "v"});
  registration.set_version(std::string(65, 'v'));
  const absl::Status refused = scheduler_->RegisterWorker(registration).status();
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(FieldsOf(refused), ::testing::IsSupersetOf({"labels", "version"}));
  WorkersQuery everyone;
  everyone.seen_within = absl::Hours(24 * 365);
  absl::StatusOr<Page<v1::Worker>> workers = store_.ListWorkers(everyone);
  ASSERT_TRUE(workers.ok()) << workers.status();
  EXPECT_TRUE(workers->items.empty()) << "the refused worker is not stored";

  const v1::SubmitSweepResponse submitted = Submit(MakeSweepSpec("limits", 1));
  const std::string worker = Register();
  const absl::StatusOr<v1::LeaseRunResponse> leased = LeaseNow(worker);
  ASSERT_TRUE(leased.ok() && leased->has_lease());
  const std::string before = RowOf(submitted.run_ids(0));
  v1::HeartbeatRequest heartbeat;
  heartbeat.set_worker_id(worker);
  heartbeat.set_run_id(submitted.run_ids(0));
  heartbeat.set_lease_epoch(1);
  heartbeat.set_lease_secret(leased->lease_secret());
  heartbeat.mutable_checkpoint()->set_uri(std::string(4097, 'c'));
  const absl::Status beat = scheduler_->Heartbeat(heartbeat).status();
  EXPECT_EQ(beat.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(FieldsOf(beat), ::testing::ElementsAre("checkpoint.uri"));
  v1::CompleteRunRequest complete;
  complete.set_run_id(submitted.run_ids(0));
  complete.set_lease_epoch(1);
  complete.set_lease_secret(leased->lease_secret());
  complete.mutable_failure()->set_failure_class(v1::FAILURE_CLASS_INFRASTRUCTURE);
  complete.mutable_failure()->mutable_status()->set_message(std::string(16385, 'm'));
  const absl::Status failed = scheduler_->CompleteRun(complete).status();
  EXPECT_EQ(failed.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(FieldsOf(failed), ::testing::ElementsAre("failure.status.message"));
  EXPECT_EQ(RowOf(submitted.run_ids(0)), before) << "a refused write must change nothing";
}

// Found by tests/fuzz (scheduler_requests_fuzzer): a failure class number the enum does not know
// (proto3 keeps it) reached the memory store, which ended the process naming it.
TEST_F(SchedulerLogicTest, AFailureClassTheEnumDoesNotKnowIsInvalidArgumentNotACrash) {
  const v1::SubmitSweepResponse submitted = Submit(MakeSweepSpec("unknown-class", 1));
  const std::string worker = Register();
  const absl::StatusOr<v1::LeaseRunResponse> leased = LeaseNow(worker);
  ASSERT_TRUE(leased.ok() && leased->has_lease());
  const std::string before = RowOf(submitted.run_ids(0));
  v1::CompleteRunRequest complete;
  complete.set_run_id(submitted.run_ids(0));
  complete.set_lease_epoch(1);
  complete.set_lease_secret(leased->lease_secret());
  complete.mutable_failure()->set_failure_class(static_cast<v1::FailureClass>(34));
  complete.mutable_failure()->mutable_status()->set_message("crashed");
  const absl::Status unknown = scheduler_->CompleteRun(complete).status();
  EXPECT_EQ(unknown.code(), absl::StatusCode::kInvalidArgument) << unknown;
  EXPECT_THAT(FieldsOf(unknown), ::testing::ElementsAre("failure.failure_class"));
  EXPECT_THAT(std::string(unknown.message()), ::testing::HasSubstr("unknown value 34"));
  EXPECT_EQ(RowOf(submitted.run_ids(0)), before) << "a refused write must change nothing";
  EXPECT_EQ(FailureClassName(static_cast<v1::FailureClass>(34)), "class 34")
      << "the memory store names what a direct caller sends without ending the process";
}

TEST_F(SchedulerLogicTest,
       ASubmissionPastTheOwnersQueuedRunLimitIsResourceExhaustedAndStoresNothing) {
  SchedulerOptions options = options_;
  options.max_queued_runs_per_owner = 5;
  SchedulerUnderTest scheduler(store_, signal_, clock_, &StubPlanner, options, nullptr);
  const Caller alice{"alice", false};
  v1::SubmitSweepRequest request;
  *request.mutable_spec() = MakeSweepSpec("queued", 4);
  ASSERT_TRUE(scheduler.SubmitSweep(request, alice).ok());
  *request.mutable_spec() = MakeSweepSpec("queued-more", 2);
  const absl::Status refused = scheduler.SubmitSweep(request, alice).status();
  EXPECT_EQ(refused.code(), absl::StatusCode::kResourceExhausted) << refused;
  EXPECT_THAT(FieldsOf(refused), ::testing::ElementsAre("spec"));
  EXPECT_THAT(std::string(refused.message()), ::testing::HasSubstr("limit of 5"));
  absl::StatusOr<OwnerLoad> load = store_.CountOwnerLoad("alice");
  ASSERT_TRUE(load.ok()) << load.status();
  EXPECT_EQ(load->queued_runs, 4u) << "nothing of it stored";
  *request.mutable_spec() = MakeSweepSpec("queued-fits", 1);
  EXPECT_TRUE(scheduler.SubmitSweep(request, alice).ok()) << "5 runs in all is the limit itself";
  EXPECT_TRUE(scheduler.SubmitSweep(request, Caller{"bob", false}).ok()) << "per identity";
}

}  // namespace
}  // namespace parity::server::testing
