// RunSupervisor against FakeSchedulerClient and the fake engine: the whole life of one run with the
// faults the worker must survive.
#include "worker/run_supervisor.h"

#include <signal.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>

#include "gtest/gtest.h"
#include "worker/tests/fake_scheduler_client.h"
#include "worker/tests/run_supervisor_fixture.h"

namespace parity::worker {
namespace {

namespace fs = std::filesystem;

TEST_F(RunSupervisorTest, SucceedsWithEveryStepAndTheSummary) {
  EXPECT_EQ(RunToEnd(Lease(30)), RunOutcome::kSucceeded);
  absl::MutexLock l(&fake_.mu);
  ASSERT_EQ(fake_.completes.size(), 1u);
  const parity::v1::CompleteRunRequest& c = fake_.completes[0];
  EXPECT_EQ(c.lease_epoch(), 7) << "every write carries the fencing token";
  ASSERT_TRUE(c.has_success());
  EXPECT_EQ(c.success().steps(), 30u);
  EXPECT_NEAR(c.success().final_val_bpc(), 2.0 + 6.0 / 4.0 + 0.05, 1e-12);
  EXPECT_EQ(c.checkpoint().step(), 30u) << "the final checkpoint goes with the completion";
  EXPECT_EQ(fake_.steps.size(), 30u) << "one point per step, none lost";
  EXPECT_EQ(*fake_.steps.begin(), 1u);
  EXPECT_EQ(fake_.points[0].run_id(), "run-1");
  EXPECT_EQ(fake_.points[0].attempt(), 1u);
  ASSERT_FALSE(fake_.heartbeats.empty());
  bool saw_checkpoint = false;
  for (const auto& h : fake_.heartbeats) {
    EXPECT_EQ(h.lease_epoch(), 7);
    saw_checkpoint |= h.has_checkpoint() && h.checkpoint().uri().find("step-") != std::string::npos;
  }
  EXPECT_TRUE(saw_checkpoint) << "heartbeats report new checkpoints";
}

TEST_F(RunSupervisorTest, BadSpecIsAUserError) {
  options_.engine_env.push_back({"FAKE_EXIT_CODE", "2"});
  EXPECT_EQ(RunToEnd(Lease(10)), RunOutcome::kFailed);
  absl::MutexLock l(&fake_.mu);
  ASSERT_EQ(fake_.completes.size(), 1u);
  EXPECT_EQ(fake_.completes[0].failure().failure_class(), parity::v1::FAILURE_CLASS_USER_ERROR);
  EXPECT_EQ(fake_.completes[0].failure().status().code(),
            static_cast<int>(absl::StatusCode::kInvalidArgument));
}

TEST_F(RunSupervisorTest, CrashIsAnInfrastructureFailureWithTheLogTail) {
  options_.engine_env.push_back({"FAKE_CRASH_AT", "7"});
  EXPECT_EQ(RunToEnd(Lease(20)), RunOutcome::kFailed);
  absl::MutexLock l(&fake_.mu);
  ASSERT_EQ(fake_.completes.size(), 1u);
  EXPECT_EQ(fake_.completes[0].failure().failure_class(), parity::v1::FAILURE_CLASS_INFRASTRUCTURE);
  EXPECT_NE(fake_.completes[0].failure().status().message().find("signal 6"), std::string::npos)
      << fake_.completes[0].failure().status().message();
  EXPECT_EQ(fake_.steps.size(), 6u) << "the points before the crash are delivered";
}

// Progress liveness: an engine that stops stepping is killed and the attempt fails as HUNG (which
// the scheduler retries), with the points it made before delivered.
TEST_F(RunSupervisorTest, AnEngineThatStopsSteppingIsKilledAsHung) {
  options_.progress_timeout = absl::Milliseconds(300);
  options_.engine_env.push_back({"FAKE_HANG_AT", "5"});
  const absl::Time t0 = absl::Now();
  EXPECT_EQ(RunToEnd(Lease(100)), RunOutcome::kFailed);
  EXPECT_LT(absl::Now() - t0, absl::Seconds(20)) << "the hung engine should be killed promptly";
  absl::MutexLock l(&fake_.mu);
  ASSERT_EQ(fake_.completes.size(), 1u);
  EXPECT_EQ(fake_.completes[0].failure().failure_class(), parity::v1::FAILURE_CLASS_HUNG);
  EXPECT_NE(fake_.completes[0].failure().status().message().find("no training progress"),
            std::string::npos)
      << fake_.completes[0].failure().status().message();
  EXPECT_EQ(fake_.steps.size(), 5u) << "the points before the hang are delivered";
}

// The first interval between two steps is measured, not assumed: a slow first interval (a
// large model, minutes per logging interval) is within the start-up allowance.
TEST_F(RunSupervisorTest, ASlowFirstIntervalIsNotAHang) {
  options_.progress_timeout = absl::Milliseconds(50);
  options_.startup_timeout = absl::Seconds(30);
  options_.engine_env = {{"FAKE_STEP_MS", "150"}};
  EXPECT_EQ(RunToEnd(Lease(4)), RunOutcome::kSucceeded);
}

TEST_F(RunSupervisorTest, AnEngineThatNeverStartsSteppingIsKilledAsHungAfterTheStartupTimeout) {
  options_.startup_timeout = absl::Milliseconds(300);
  options_.engine_env.push_back({"FAKE_HANG_AT", "0"});
  EXPECT_EQ(RunToEnd(Lease(100)), RunOutcome::kFailed);
  absl::MutexLock l(&fake_.mu);
  ASSERT_EQ(fake_.completes.size(), 1u);
  EXPECT_EQ(fake_.completes[0].failure().failure_class(), parity::v1::FAILURE_CLASS_HUNG);
}

// A slow but steady engine is not hung: the allowance grows with the gaps it has shown.
TEST_F(RunSupervisorTest, SlowStepsAreNotMistakenForAHang) {
  options_.progress_timeout = absl::Milliseconds(100);
  options_.engine_env = {{"FAKE_STEP_MS", "60"}};
  EXPECT_EQ(RunToEnd(Lease(10)), RunOutcome::kSucceeded);
}

TEST_F(RunSupervisorTest, DivergenceFailsAsDiverged) {
  options_.engine_env.push_back({"FAKE_EXIT_CODE", "6"});
  EXPECT_EQ(RunToEnd(Lease(20)), RunOutcome::kFailed);
  absl::MutexLock l(&fake_.mu);
  ASSERT_EQ(fake_.completes.size(), 1u);
  EXPECT_EQ(fake_.completes[0].failure().failure_class(), parity::v1::FAILURE_CLASS_DIVERGED);
}

// Honest completion: exit 0 is a success only with a summary that matches the plan.
TEST_F(RunSupervisorTest, ExitZeroWithoutASummaryIsAnInvalidResult) {
  options_.engine_env.push_back({"FAKE_NO_SUMMARY", "1"});
  EXPECT_EQ(RunToEnd(Lease(20)), RunOutcome::kFailed);
  absl::MutexLock l(&fake_.mu);
  ASSERT_EQ(fake_.completes.size(), 1u);
  EXPECT_EQ(fake_.completes[0].failure().failure_class(), parity::v1::FAILURE_CLASS_INVALID_RESULT);
  EXPECT_NE(fake_.completes[0].failure().status().message().find("without a summary"),
            std::string::npos)
      << fake_.completes[0].failure().status().message();
}

TEST_F(RunSupervisorTest, ASummaryThatDisagreesWithThePlanIsAnInvalidResult) {
  // The fake engine consumes 1024 tokens a step and counts 6e6 FLOPs per token.
  parity::v1::LeaseRunResponse matching = Lease(20);
  matching.mutable_run()->mutable_spec()->mutable_accounting()->set_tokens(20 * 1024);
  matching.mutable_run()->mutable_spec()->mutable_accounting()->set_flops_per_token(6.03e6);
  EXPECT_EQ(RunToEnd(matching), RunOutcome::kSucceeded) << "within 1% of M is a success";

  parity::v1::LeaseRunResponse other_tokens = Lease(20);
  other_tokens.mutable_run()->mutable_spec()->mutable_accounting()->set_tokens(20 * 2048);
  EXPECT_EQ(RunToEnd(other_tokens), RunOutcome::kFailed);
  parity::v1::LeaseRunResponse other_m = Lease(20);
  other_m.mutable_run()->mutable_spec()->mutable_accounting()->set_flops_per_token(6.1e6);
  EXPECT_EQ(RunToEnd(other_m), RunOutcome::kFailed);
  absl::MutexLock l(&fake_.mu);
  ASSERT_EQ(fake_.completes.size(), 3u);
  EXPECT_TRUE(fake_.completes[0].has_success());
  for (int i : {1, 2}) {
    EXPECT_EQ(fake_.completes[i].failure().failure_class(),
              parity::v1::FAILURE_CLASS_INVALID_RESULT);
  }
  EXPECT_NE(fake_.completes[1].failure().status().message().find("tokens 20480, planned 40960"),
            std::string::npos)
      << fake_.completes[1].failure().status().message();
  EXPECT_NE(fake_.completes[2].failure().status().message().find("FLOPs per token"),
            std::string::npos)
      << fake_.completes[2].failure().status().message();
}

TEST_F(RunSupervisorTest, MissingEngineIsAnInfrastructureFailure) {
  options_.train_binary = "/nonexistent/parity-train";
  EXPECT_EQ(RunToEnd(Lease(5)), RunOutcome::kFailed);
  absl::MutexLock l(&fake_.mu);
  ASSERT_EQ(fake_.completes.size(), 1u);
  EXPECT_EQ(fake_.completes[0].failure().failure_class(), parity::v1::FAILURE_CLASS_INFRASTRUCTURE);
}

TEST_F(RunSupervisorTest, CancellationStopsTheEngineWithoutACompletion) {
  fake_.cancel_after_heartbeats = 3;
  const absl::Time t0 = absl::Now();
  EXPECT_EQ(RunToEnd(Lease(100000)), RunOutcome::kCancelled);
  EXPECT_LT(absl::Now() - t0, absl::Seconds(5));
  absl::MutexLock l(&fake_.mu);
  EXPECT_TRUE(fake_.completes.empty()) << "the run is already CANCELLED server-side";
}

TEST_F(RunSupervisorTest, CancellationEscalatesToSigkill) {
  options_.engine_env.push_back({"FAKE_IGNORE_TERM", "1"});
  fake_.cancel_after_heartbeats = 3;  // ~200 ms in: the engine has installed SIG_IGN by then
  const absl::Time t0 = absl::Now();
  EXPECT_EQ(RunToEnd(Lease(100000)), RunOutcome::kCancelled);
  const absl::Duration took = absl::Now() - t0;
  EXPECT_GE(took, absl::Seconds(1)) << "SIGKILL only after the grace";
  EXPECT_LT(took, absl::Seconds(5));
}

TEST_F(RunSupervisorTest, LostLeaseKillsTheEngineAndReportsNothing) {
  fake_.lose_lease_after_heartbeats = 3;
  const absl::Time t0 = absl::Now();
  EXPECT_EQ(RunToEnd(Lease(100000)), RunOutcome::kLeaseLost);
  EXPECT_LT(absl::Now() - t0, absl::Seconds(3)) << "no grace for a run someone else owns";
  absl::MutexLock l(&fake_.mu);
  EXPECT_TRUE(fake_.completes.empty());
}

TEST_F(RunSupervisorTest, SchedulerOutageIsRetriedWithoutLosingPoints) {
  fake_.fail_heartbeats = 5;
  fake_.fail_metrics = 8;
  fake_.fail_completes = 3;
  EXPECT_EQ(RunToEnd(Lease(40)), RunOutcome::kSucceeded);
  absl::MutexLock l(&fake_.mu);
  EXPECT_EQ(fake_.steps.size(), 40u) << "unacknowledged points are resent";
  EXPECT_EQ(*fake_.steps.rbegin(), 40u);
  EXPECT_EQ(fake_.completes.size(), 1u);
  EXPECT_LE(fake_.max_batch, 256u);
}

// A resume goes to the checkpoint the scheduler recorded; one recorded past points that were
// never stored would leave a hole in the run's curve.
TEST_F(RunSupervisorTest, ACheckpointIsReportedOnlyOnceItsPointsAreStored) {
  fake_.fail_metrics = 8;  // points wait while heartbeats go through, then flow
  EXPECT_EQ(RunToEnd(Lease(200)), RunOutcome::kSucceeded);
  absl::MutexLock l(&fake_.mu);
  EXPECT_FALSE(fake_.checkpoint_reports.empty()) << "heartbeats report checkpoints";
  for (const auto& [checkpoint_step, stored_through] : fake_.checkpoint_reports) {
    EXPECT_LE(checkpoint_step, stored_through)
        << "a heartbeat reported the checkpoint at step " << checkpoint_step
        << " while points were stored only through step " << stored_through;
  }
  EXPECT_EQ(fake_.steps.size(), 200u);
}

// The engine prunes its own directory to its newest few checkpoints, and keeps training while
// its worker is cut off: the checkpoint a heartbeat records is a hard link outside that
// directory, so the run's resume point survives; only the latest recorded one is kept.
TEST_F(RunSupervisorTest, TheRecordedCheckpointIsKeptWhereTheEngineDoesNotPrune) {
  EXPECT_EQ(RunToEnd(Lease(200)), RunOutcome::kSucceeded);
  std::string last;
  {
    absl::MutexLock l(&fake_.mu);
    for (const parity::v1::HeartbeatRequest& h : fake_.heartbeats) {
      if (!h.has_checkpoint()) continue;
      EXPECT_TRUE(h.checkpoint().uri().starts_with("run-1/recorded-7/step-"))
          << "recorded checkpoint " << h.checkpoint().uri()
          << " is not the kept link, relative to the checkpoint store";
      last = (root_ / "ckpt" / h.checkpoint().uri()).string();
    }
  }
  ASSERT_FALSE(last.empty()) << "heartbeats should have recorded a checkpoint";
  EXPECT_TRUE(fs::is_regular_file(last)) << last << " must outlive the engine's pruning";
  std::vector<std::string> kept;
  for (const auto& entry : fs::directory_iterator(fs::path(last).parent_path())) {
    kept.push_back(entry.path().string());
  }
  EXPECT_EQ(kept, std::vector<std::string>{last}) << "older recorded links are removed";
}

// The worker's clock decides nothing about the lease: an outage longer than the TTL stops nothing,
// the points wait, and the run ends as if nothing happened.
TEST_F(RunSupervisorTest, AnOutageLongerThanTheTtlStopsNothing) {
  options_.lease_ttl = absl::Milliseconds(300);
  fake_.fail_heartbeats = 25;  // ≥ 25 × 20 ms of backoff, well past the TTL
  fake_.fail_metrics = 25;
  const absl::Time t0 = absl::Now();
  EXPECT_EQ(RunToEnd(Lease(80)), RunOutcome::kSucceeded);
  EXPECT_GT(absl::Now() - t0, absl::Milliseconds(600)) << "the outage should outlast the TTL";
  absl::MutexLock l(&fake_.mu);
  EXPECT_EQ(fake_.steps.size(), 80u) << "every point reaches the scheduler after the outage";
  ASSERT_EQ(fake_.completes.size(), 1u);
  EXPECT_TRUE(fake_.completes[0].has_success());
}

// A resume whose recorded checkpoint file is gone (pruned) falls back to the newest older one in
// any of the run's attempt directories, never to a newer one.
TEST_F(RunSupervisorTest, AMissingRecordedCheckpointFallsBackToAnOlderOne) {
  const fs::path old_attempt = root_ / "ckpt" / "run-1" / "epoch-3";
  fs::create_directories(old_attempt);
  for (int step : {10, 20, 30}) {
    char name[32];
    std::snprintf(name, sizeof name, "step-%08d.ckpt", step);
    std::ofstream(old_attempt / name) << step << "\n";
  }
  parity::v1::Checkpoint recorded;
  recorded.set_step(25);
  recorded.set_uri("run-1/epoch-3/step-00000025.ckpt");  // pruned
  EXPECT_EQ(RunToEnd(Lease(40, /*attempt=*/2, recorded)), RunOutcome::kSucceeded);
  absl::MutexLock l(&fake_.mu);
  ASSERT_FALSE(fake_.points.empty());
  EXPECT_EQ(fake_.points.front().step(), 21u) << "resumed from step 20, the newest at or before 25";
}

// A corrupt recorded checkpoint fails neither this attempt nor the next: the engine is started
// again from the newest older checkpoint.
TEST_F(RunSupervisorTest, ACorruptRecordedCheckpointFallsBackToTheNewestIntactOne) {
  const fs::path old_attempt = root_ / "ckpt" / "run-1" / "epoch-3";
  fs::create_directories(old_attempt);
  std::ofstream(old_attempt / "step-00000010.ckpt") << "10\n";
  std::ofstream(old_attempt / "step-00000020.ckpt") << "20\n";
  std::ofstream(old_attempt / "step-00000030.ckpt") << "garbage\n";  // torn or bit-rotted
  parity::v1::Checkpoint recorded;
  recorded.set_step(30);
  recorded.set_uri("run-1/epoch-3/step-00000030.ckpt");
  EXPECT_EQ(RunToEnd(Lease(40, /*attempt=*/2, recorded)), RunOutcome::kSucceeded);
  absl::MutexLock l(&fake_.mu);
  ASSERT_FALSE(fake_.points.empty());
  EXPECT_EQ(fake_.points.front().step(), 21u) << "resumed from step 20, the newest intact one";
  ASSERT_EQ(fake_.completes.size(), 1u);
  EXPECT_TRUE(fake_.completes[0].has_success());
}

TEST_F(RunSupervisorTest, PreemptedRunCheckpointsAndResumesToTheSameResult) {
  {
    RunSupervisor sup(fake_, options_, Lease(60), DeviceGrant{.threads = 1});
    sup.Start();
    absl::SleepFor(absl::Milliseconds(250));
    sup.Preempt();
    sup.Join();
    EXPECT_EQ(sup.outcome(), RunOutcome::kPreempted);
  }
  uint64_t stopped_at = 0;
  parity::v1::Checkpoint recorded;
  {
    absl::MutexLock l(&fake_.mu);
    ASSERT_EQ(fake_.completes.size(), 1u);
    EXPECT_EQ(fake_.completes[0].failure().failure_class(), parity::v1::FAILURE_CLASS_PREEMPTED);
    recorded = fake_.completes[0].checkpoint();
    stopped_at = recorded.step();
    EXPECT_GT(stopped_at, 0u) << "the engine checkpointed on SIGTERM";
    EXPECT_LT(stopped_at, 60u);
    fake_.completes.clear();
  }
  // Attempt 2 on the same store: resumes from the checkpoint and ends as an uninterrupted run.
  EXPECT_EQ(RunToEnd(Lease(60, /*attempt=*/2, recorded)), RunOutcome::kSucceeded);
  absl::MutexLock l(&fake_.mu);
  ASSERT_EQ(fake_.completes.size(), 1u);
  EXPECT_NEAR(fake_.completes[0].success().final_val_bpc(), 2.0 + 6.0 / 7.0 + 0.05, 1e-12);
  EXPECT_EQ(fake_.steps.size(), 60u);
  bool resumed_points = false;
  for (const auto& p : fake_.points)
    resumed_points |= p.attempt() == 2 && p.step() == stopped_at + 1;
  EXPECT_TRUE(resumed_points) << "attempt 2 continued at step " << stopped_at + 1;
}

}  // namespace
}  // namespace parity::worker
