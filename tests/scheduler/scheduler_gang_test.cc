// Gangs through the scheduling logic (LeasesService, leases_gangs.cc) on the memory store and the
// fake clock: LeaseRun long polls of several workers answered with one gang's slots, the
// rendezvous RPCs, only rank 0 reporting metrics, a rank's failure restarting the whole gang, the
// rendezvous timeout requeued without charge, a lost slot answer given again to its retry, and a
// starving gang keeping workers from small runs. What each store does is the contract's
// (gang_contract_test.h).
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "core/proto_time.h"
#include "gmock/gmock.h"
#include "tests/scheduler/scheduler_logic_fixture.h"

namespace parity::server::testing {
namespace {

// A LeaseRun long poll in flight, answered on a scheduler thread.
struct PendingCall {
  absl::Mutex mu;
  std::optional<absl::StatusOr<v1::LeaseRunResponse>> answer ABSL_GUARDED_BY(mu);
  bool answered() {
    absl::MutexLock lock(&mu);
    return answer.has_value();
  }
  absl::StatusOr<v1::LeaseRunResponse> Take() {
    absl::MutexLock lock(&mu);
    return answer.value_or(absl::InternalError("not answered"));
  }
};

class GangLogicTest : public SchedulerLogicTest {
 protected:
  void SetUp() override {
    SchedulerLogicTest::SetUp();
    options_.gang_rendezvous_timeout = absl::Seconds(10);
    options_.gang_reservation_after = absl::Seconds(5);
    Rewire(&StubPlanner);
  }

  // A sweep of one run of `ranks` ranks (8 threads each: one worker's CpuDevice() each).
  std::string SubmitGang(const std::string& name, int ranks) {
    v1::SweepSpec spec = MakeSweepSpec(name, 1);
    (*spec.mutable_labels())["ranks"] = std::to_string(ranks);
    return Submit(spec).run_ids(0);
  }
  // `request_id` and `retry` as a worker whose answer was lost sends them again.
  std::shared_ptr<PendingCall> LongPoll(const std::string& worker, bool accepts_gangs = true,
                                        const std::string& request_id = "", bool retry = false) {
    auto call = std::make_shared<PendingCall>();
    v1::LeaseRunRequest request = LeaseRequestFor(worker);
    *request.mutable_wait_time() = ToProtoDuration(absl::Seconds(30));
    request.set_accepts_gangs(accepts_gangs);
    request.set_request_id(request_id);
    request.set_retry(retry);
    scheduler_->LeaseRun(request, absl::InfiniteFuture(), {},
                         [call](absl::StatusOr<v1::LeaseRunResponse> answer) {
                           absl::MutexLock lock(&call->mu);
                           call->answer = std::move(answer);
                         });
    return call;
  }
  // Both workers long-poll until each holds its slot of the gang; rank 0's answer first.
  std::vector<v1::LeaseRunResponse> PlaceGangOn(const std::string& a, const std::string& b) {
    auto first = LongPoll(a), second = LongPoll(b);
    PumpClockUntil([&] { return first->answered() && second->answered(); });
    std::vector<v1::LeaseRunResponse> answers;
    for (const auto& call : {first, second}) {
      absl::StatusOr<v1::LeaseRunResponse> answer = call->Take();
      EXPECT_TRUE(answer.ok() && answer->has_gang()) << answer.status();
      if (answer.ok()) answers.push_back(*answer);
    }
    if (answers.size() == 2 && answers[0].gang().ranks(0).rank() != 0) {
      std::swap(answers[0], answers[1]);
    }
    return answers;
  }
  static std::string WorkerOf(const v1::LeaseRunResponse& answer, const std::string& a,
                              const std::string& b, bool rank0) {
    return (answer.lease().worker_id() == a) == rank0 ? a : b;
  }
  v1::CheckInRendezvousRequest CheckIn(const v1::LeaseRunResponse& slot, const std::string& worker,
                                       uint32_t rank) {
    v1::CheckInRendezvousRequest request;
    request.set_run_id(slot.run().run_id());
    request.set_lease_epoch(slot.gang().gang_epoch());
    request.set_worker_id(worker);
    request.set_rank(rank);
    request.set_lease_secret(slot.lease_secret());
    return request;
  }
  v1::PostRendezvousRequest Post(const v1::LeaseRunResponse& slot, const std::string& worker) {
    v1::PostRendezvousRequest request;
    request.set_run_id(slot.run().run_id());
    request.set_lease_epoch(slot.gang().gang_epoch());
    request.set_worker_id(worker);
    request.set_address("127.0.0.1:29500");
    request.set_lease_secret(slot.lease_secret());
    return request;
  }
  v1::HeartbeatRequest Beat(const v1::LeaseRunResponse& slot, const std::string& worker) {
    v1::HeartbeatRequest request;
    request.set_worker_id(worker);
    request.set_run_id(slot.run().run_id());
    request.set_lease_epoch(slot.gang().gang_epoch());
    request.set_lease_secret(slot.lease_secret());
    return request;
  }
  v1::ReportMetricsRequest Metrics(const v1::LeaseRunResponse& slot) {
    v1::ReportMetricsRequest request;
    request.set_run_id(slot.run().run_id());
    request.set_lease_epoch(slot.gang().gang_epoch());
    request.set_lease_secret(slot.lease_secret());
    request.add_points()->set_step(1);
    return request;
  }
};

TEST_F(GangLogicTest, TwoLongPollsGetTheirSlotsAndMeetAtTheRendezvous) {
  const std::string run_id = SubmitGang("gang", 2);
  const std::string a = Register(), b = Register();
  const std::vector<v1::LeaseRunResponse> slots = PlaceGangOn(a, b);
  ASSERT_EQ(slots.size(), 2u);
  EXPECT_EQ(slots[0].gang().gang_epoch(), slots[1].gang().gang_epoch()) << "one epoch";
  EXPECT_EQ(slots[0].gang().world_size(), 2u);
  EXPECT_EQ(slots[1].gang().ranks(0).rank(), 1u);
  EXPECT_EQ(slots[0].lease().lease_epoch(), slots[0].gang().gang_epoch());
  EXPECT_NE(slots[0].lease_secret(), slots[1].lease_secret()) << "rank 0's and a follower's";
  const std::string rank0 = slots[0].lease().worker_id();
  const std::string rank1 = rank0 == a ? b : a;

  absl::StatusOr<v1::RendezvousResponse> early =
      scheduler_->CheckInRendezvous(CheckIn(slots[1], rank1, 1));
  ASSERT_TRUE(early.ok()) << early.status();
  EXPECT_FALSE(early->released()) << "rank 0 has not posted";
  EXPECT_EQ(scheduler_->PostRendezvous(Post(slots[1], rank1)).status().code(),
            absl::StatusCode::kPermissionDenied)
      << "a follower's secret cannot post";
  absl::StatusOr<v1::RendezvousResponse> posted = scheduler_->PostRendezvous(Post(slots[0], rank0));
  ASSERT_TRUE(posted.ok()) << posted.status();
  EXPECT_TRUE(posted->released());
  absl::StatusOr<v1::RendezvousResponse> joined =
      scheduler_->CheckInRendezvous(CheckIn(slots[1], rank1, 1));
  ASSERT_TRUE(joined.ok()) << joined.status();
  EXPECT_EQ(joined->address(), "127.0.0.1:29500");

  // Both heartbeat; only rank 0 reports metrics.
  EXPECT_TRUE(scheduler_->Heartbeat(Beat(slots[0], rank0)).ok());
  EXPECT_TRUE(scheduler_->Heartbeat(Beat(slots[1], rank1)).ok()) << "a follower renews its slot";
  EXPECT_TRUE(scheduler_->ReportMetrics(Metrics(slots[0])).ok());
  EXPECT_EQ(scheduler_->ReportMetrics(Metrics(slots[1])).status().code(),
            absl::StatusCode::kPermissionDenied)
      << "metrics exactly once: rank 0's";
  EXPECT_EQ(PointsOf(run_id), 1u);
}

TEST_F(GangLogicTest, ALostSlotAnswerIsGivenAgainToTheRetryOfItsCall) {
  const std::string run_id = SubmitGang("gang-lost-answer", 2);
  const std::string a = Register(), b = Register();
  auto first = LongPoll(a, true, "call-a"), second = LongPoll(b, true, "call-b");
  PumpClockUntil([&] { return first->answered() && second->answered(); });
  const absl::StatusOr<v1::LeaseRunResponse> lost = second->Take();  // never reached b
  ASSERT_TRUE(lost.ok() && lost->has_gang()) << lost.status();

  auto retry = LongPoll(b, true, "call-b", /*retry=*/true);
  PumpClockUntil([&] { return retry->answered(); });
  const absl::StatusOr<v1::LeaseRunResponse> again = retry->Take();
  ASSERT_TRUE(again.ok() && again->has_gang()) << "the retry gets the slots its call was given";
  EXPECT_EQ(again->run().run_id(), run_id);
  EXPECT_EQ(again->gang().gang_epoch(), lost->gang().gang_epoch()) << "the same gang, not new";
  EXPECT_EQ(again->gang().ranks(0).rank(), lost->gang().ranks(0).rank());
  EXPECT_EQ(again->lease_secret(), lost->lease_secret()) << "the same lease, the same secret";
  EXPECT_EQ(store_.GetRun(run_id).value().state(), v1::RUN_STATE_LEASED) << "nothing restarted";

  auto other = LongPoll(b, true, "call-b-next", /*retry=*/true);
  for (int i = 0; i < 5; ++i) {
    clock_.Advance(absl::Milliseconds(100));
    absl::SleepFor(absl::Milliseconds(2));
  }
  EXPECT_FALSE(other->answered()) << "another call's retry is not given them: it waits";
  clock_.Advance(absl::Seconds(30));
  PumpClockUntil([&] { return other->answered(); });
  EXPECT_FALSE(other->Take()->has_gang());
}

TEST_F(GangLogicTest, AWorkerThatCannotStartRanksIsNeverGivenASlot) {
  const std::string run_id = SubmitGang("gang-old-workers", 2);
  const std::string a = Register(), b = Register();
  auto first = LongPoll(a, /*accepts_gangs=*/false), second = LongPoll(b, false);
  for (int i = 0; i < 10; ++i) {
    clock_.Advance(absl::Milliseconds(100));
    absl::SleepFor(absl::Milliseconds(2));
  }
  EXPECT_FALSE(first->answered() || second->answered()) << "waiting for ordinary work only";
  EXPECT_EQ(store_.GetRun(run_id).value().state(), v1::RUN_STATE_PENDING);
  clock_.Advance(absl::Seconds(30));  // their long polls end empty
  PumpClockUntil([&] { return first->answered() && second->answered(); });
  EXPECT_FALSE(first->Take()->has_lease());
}

TEST_F(GangLogicTest, ARankFailureRestartsTheWholeGangAndStopsTheOthers) {
  const std::string run_id = SubmitGang("gang-fail", 2);
  const std::string a = Register(), b = Register();
  const std::vector<v1::LeaseRunResponse> slots = PlaceGangOn(a, b);
  ASSERT_EQ(slots.size(), 2u);
  const std::string rank0 = slots[0].lease().worker_id();
  const std::string rank1 = rank0 == a ? b : a;
  v1::CompleteRunRequest failure;
  failure.set_run_id(run_id);
  failure.set_lease_epoch(slots[1].gang().gang_epoch());
  failure.set_lease_secret(slots[1].lease_secret());
  failure.mutable_failure()->set_failure_class(v1::FAILURE_CLASS_INFRASTRUCTURE);
  failure.mutable_failure()->mutable_status()->set_message("rank 1 was killed");
  absl::StatusOr<v1::CompleteRunResponse> completed = scheduler_->CompleteRun(failure);
  ASSERT_TRUE(completed.ok()) << completed.status();
  EXPECT_EQ(completed->run().state(), v1::RUN_STATE_PENDING);
  EXPECT_EQ(completed->run().attempt(), 2u);
  // Rank 0's next heartbeat tells its worker to stop it; its writes are refused.
  EXPECT_EQ(scheduler_->Heartbeat(Beat(slots[0], rank0)).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(scheduler_->ReportMetrics(Metrics(slots[0])).status().code(),
            absl::StatusCode::kFailedPrecondition);
  // Placed again as a gang, under a newer epoch.
  clock_.Advance(absl::Seconds(1));  // the retry backoff
  const std::vector<v1::LeaseRunResponse> again = PlaceGangOn(a, b);
  ASSERT_EQ(again.size(), 2u);
  EXPECT_GT(again[0].gang().gang_epoch(), slots[0].gang().gang_epoch() + 1);
  EXPECT_EQ(again[0].run().attempt(), 2u);
}

TEST_F(GangLogicTest, ARendezvousThatTimesOutRequeuesTheGangWithoutSpendingAnAttempt) {
  const std::string run_id = SubmitGang("gang-timeout", 2);
  const std::string a = Register(), b = Register();
  const std::vector<v1::LeaseRunResponse> slots = PlaceGangOn(a, b);
  ASSERT_EQ(slots.size(), 2u);
  ASSERT_TRUE(scheduler_->PostRendezvous(Post(slots[0], slots[0].lease().worker_id())).ok());
  clock_.Advance(absl::Seconds(5));
  absl::StatusOr<int> none = scheduler_->FailLapsedGangs();
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(*none, 0) << "before the deadline";
  clock_.Advance(absl::Seconds(6));
  absl::StatusOr<int> failed = scheduler_->FailLapsedGangs();
  ASSERT_TRUE(failed.ok()) << failed.status();
  EXPECT_EQ(*failed, 1);
  const v1::Run run = store_.GetRun(run_id).value();
  EXPECT_EQ(run.state(), v1::RUN_STATE_PENDING);
  EXPECT_EQ(run.attempt(), 1u) << "a placement failure is not the run's";
  EXPECT_EQ(run.failure_class(), v1::FAILURE_CLASS_INFRASTRUCTURE);
  EXPECT_THAT(run.failure().message(), ::testing::HasSubstr("ranks 1 never checked in"));
  EXPECT_EQ(run.preemptions(), 1u);
}

TEST_F(GangLogicTest, AStarvingGangKeepsAFreedWorkerFromSmallRuns) {
  const std::string gang = SubmitGang("gang-starving", 2);
  const std::string a = Register(), b = Register();
  clock_.Advance(absl::Seconds(6));  // past gang_reservation_after
  const v1::SubmitSweepResponse small = Submit(MakeSweepSpec("small", 1));
  auto first = LongPoll(a);
  for (int i = 0; i < 20; ++i) {  // two seconds of the worker's long poll, re-checking
    clock_.Advance(absl::Milliseconds(100));
    absl::SleepFor(absl::Milliseconds(2));
  }
  EXPECT_FALSE(first->answered()) << "kept for the starving gang, not given the small run";
  EXPECT_EQ(store_.GetRun(small.run_ids(0)).value().state(), v1::RUN_STATE_PENDING);
  auto second = LongPoll(b);
  PumpClockUntil([&] { return first->answered() && second->answered(); });
  EXPECT_TRUE(first->Take()->has_gang());
  EXPECT_TRUE(second->Take()->has_gang());
  EXPECT_EQ(store_.GetRun(gang).value().state(), v1::RUN_STATE_LEASED);
  EXPECT_EQ(store_.GetRun(small.run_ids(0)).value().state(), v1::RUN_STATE_PENDING);
}

}  // namespace
}  // namespace parity::server::testing
