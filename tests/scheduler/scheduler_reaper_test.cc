// The reaper and its outage windows (issue #25 point 3): a lapse with the service up spends an
// attempt; one in an outage — a restart, or a silence in the reaper's shared record — does not,
// and nothing is reaped until holders could reconnect. On the memory store and the fake clock
// (scheduler_logic_fixture.h): the server's reaper passes every few seconds (RunReaper), an
// outage is the clock moving with no pass.
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "tests/scheduler/scheduler_logic_fixture.h"

namespace parity::server::testing {
namespace {

using ::testing::ElementsAre;

// A scheduler that was down longer than the TTL finds every lease expired; its workers could not
// heartbeat, which is no sign they died. Its start-up pass begins a grace (recorded in the
// store, for every replica): nothing is reaped until the holders could reconnect, and a lease
// that lapsed without being renewed after the start goes back without spending an attempt.
TEST_F(SchedulerLogicTest, ARestartedSchedulerRequeuesLeasesLapsedInTheOutageWithoutCharge) {
  v1::SweepSpec spec = MakeSweepSpec("restart-grace", 2);
  spec.set_max_attempts(1);  // any charged lapse would fail the run
  const v1::SubmitSweepResponse submitted = Submit(spec);
  const std::string worker = Register();
  const absl::StatusOr<v1::LeaseRunResponse> reconnects = LeaseNow(worker);
  ASSERT_TRUE(reconnects.ok() && reconnects->has_lease());
  ASSERT_TRUE(LeaseNow(worker)->has_lease());
  StopScheduler();  // the outage: no reaper, no heartbeat, for longer than the TTL
  clock_.Advance(options_.lease_ttl + absl::Seconds(1));

  SchedulerUnderTest restarted(store_, signal_, clock_, &StubPlanner, options_, nullptr);
  absl::StatusOr<ReapResult> first = restarted.ReapExpiredLeases(Upkeep::ReapPass::kStartUp);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_TRUE(first->liveness.outage);
  EXPECT_EQ(first->requeued + first->failed + first->outage_requeued, 0)
      << "the start-up pass reaped a lease its worker could not renew";
  EXPECT_EQ(first->liveness.reap_from, clock_.Now() + 2 * options_.lease_ttl)
      << "nothing reaped for two TTLs (60 s)";
  EXPECT_EQ(first->liveness.charge_from, clock_.Now() + options_.lease_ttl)
      << "lapses within a TTL (30 s) are not charged";

  v1::HeartbeatRequest heartbeat;  // one worker reconnects within the grace, and stays
  heartbeat.set_worker_id(worker);
  heartbeat.set_run_id(reconnects->run().run_id());
  heartbeat.set_lease_epoch(reconnects->lease().lease_epoch());
  heartbeat.set_lease_secret(reconnects->lease_secret());
  ASSERT_TRUE(restarted.Heartbeat(heartbeat).ok());
  const ReapResult after = RunReaper(restarted, 2 * options_.lease_ttl + kReapEvery,
                                     [&] { EXPECT_TRUE(restarted.Heartbeat(heartbeat).ok()); });
  EXPECT_EQ(after.outage_requeued, 1) << "the lease no one renewed";
  EXPECT_EQ(after.requeued + after.failed, 0);
  std::vector<std::string> states;
  for (const v1::Run& run : RunsOf(submitted.sweep().sweep_id())) {
    states.push_back(absl::StrCat(v1::RunState_Name(run.state()), " ", run.attempt()));
  }
  EXPECT_THAT(states, ElementsAre("RUN_STATE_RUNNING 1", "RUN_STATE_PENDING 1"));
  const std::vector<RunEvent> events = EventsOf(submitted.run_ids(1));
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events.back().reason, "lease expired during an outage");
  EXPECT_EQ(events.back().to_state, v1::RUN_STATE_PENDING);
  EXPECT_EQ(events.back().attempt, 1u);
}

// Replicas share the record: a silence in it (no replica reaped for a while) is an outage too,
// whoever made the last pass; with the service up throughout, a lapse is the run's.
TEST_F(SchedulerLogicTest, ASilenceInTheReapersRecordIsAnOutageWhicheverReplicaReaped) {
  v1::SweepSpec spec = MakeSweepSpec("silence", 2);
  spec.set_max_attempts(1);
  const v1::SubmitSweepResponse submitted = Submit(spec);
  const std::string worker = Register();
  ASSERT_TRUE(LeaseNow(worker)->has_lease());
  const ReapResult up = LetLeasesLapse();  // passes without a gap
  EXPECT_FALSE(up.liveness.outage);
  EXPECT_EQ(up.failed, 1) << "lapsed with the service up: charged (its last attempt)";

  ASSERT_TRUE(LeaseNow(worker)->has_lease());
  // No replica passes for longer than the TTL (the silence limit is TTL / 3 = 10 s): the lease
  // lapses in the silence.
  clock_.Advance(options_.lease_ttl + absl::Seconds(1));
  SchedulerUnderTest other_replica(store_, signal_, clock_, &StubPlanner, options_, nullptr);
  absl::StatusOr<ReapResult> after_gap = other_replica.ReapExpiredLeases();
  ASSERT_TRUE(after_gap.ok()) << after_gap.status();
  EXPECT_TRUE(after_gap->liveness.outage) << "a 31 s silence";
  EXPECT_EQ(after_gap->failed + after_gap->outage_requeued, 0) << "within the grace";
  const ReapResult later = RunReaper(other_replica, 2 * options_.lease_ttl + kReapEvery);
  EXPECT_EQ(later.outage_requeued, 1);
  EXPECT_EQ(later.failed, 0);
  std::vector<v1::RunState> states;
  for (const v1::Run& run : RunsOf(submitted.sweep().sweep_id())) states.push_back(run.state());
  EXPECT_THAT(states, ElementsAre(v1::RUN_STATE_FAILED, v1::RUN_STATE_PENDING));
}

TEST_F(SchedulerLogicTest, ReaperRequeuesExpiredLeaseThenFailsPastMaxAttempts) {
  v1::SweepSpec spec = MakeSweepSpec("reap", 1);
  spec.set_max_attempts(2);
  const v1::SubmitSweepResponse submitted = Submit(spec);
  const std::string worker = Register();
  const std::string& run_id = submitted.run_ids(0);

  ASSERT_TRUE(LeaseNow(worker)->has_lease());
  EXPECT_EQ(LetLeasesLapse().requeued, 1);
  const std::vector<v1::Run> runs = RunsOf(submitted.sweep().sweep_id());
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0].state(), v1::RUN_STATE_PENDING);
  EXPECT_EQ(runs[0].attempt(), 2u);
  const std::vector<RunEvent> events = EventsOf(run_id);
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events.back().reason, "lease expired");
  EXPECT_EQ(events.back().to_state, v1::RUN_STATE_PENDING);
  EXPECT_EQ(events.back().attempt, 2u);

  absl::StatusOr<v1::LeaseRunResponse> second = LeaseNow(worker);
  ASSERT_TRUE(second->has_lease());
  EXPECT_EQ(second->run().attempt(), 2u);
  EXPECT_EQ(LetLeasesLapse().failed, 1);
  v1::GetRunRequest get;
  get.set_run_id(submitted.run_ids(0));
  absl::StatusOr<v1::GetRunResponse> run = scheduler_->GetRun(get);
  ASSERT_TRUE(run.ok());
  EXPECT_EQ(run->run().state(), v1::RUN_STATE_FAILED);
  EXPECT_EQ(run->run().failure_class(), v1::FAILURE_CLASS_LEASE_EXPIRED);
  absl::StatusOr<v1::Sweep> sweep = store_.GetSweep(submitted.sweep().sweep_id());
  ASSERT_TRUE(sweep.ok()) << sweep.status();
  EXPECT_EQ(sweep->state(), v1::SWEEP_STATE_FAILED);
}

}  // namespace
}  // namespace parity::server::testing
