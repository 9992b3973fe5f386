// The scheduling logic — leases, heartbeats, metrics, completions, fencing, retries, retention,
// placement, long polls — called directly (no gRPC) on the memory store and the fake clock
// (scheduler_logic_fixture.h): time moves only when a test moves it. The reaper's outage windows
// are in scheduler_reaper_test.cc, the limits in scheduler_limits_test.cc. Each test names the
// exact status code it expects.
#include <set>
#include <thread>

#include "absl/synchronization/mutex.h"
#include "core/field_violation.h"
#include "core/summary_check.h"
#include "gmock/gmock.h"
#include "tests/scheduler/scheduler_logic_fixture.h"

namespace parity::server::testing {
namespace {

using ::testing::ElementsAre;

TEST_F(SchedulerLogicTest, SubmitLeaseHeartbeatMetricsCompleteReachesResults) {
  const v1::SubmitSweepResponse submitted = Submit(MakeSweepSpec("lifecycle", 2));
  ASSERT_EQ(submitted.run_ids().size(), 2);
  EXPECT_EQ(submitted.sweep().state(), v1::SWEEP_STATE_ACTIVE);
  EXPECT_EQ(submitted.sweep().counts().pending(), 2u);
  const std::string worker = Register();

  for (int i = 0; i < 2; ++i) {
    absl::StatusOr<v1::LeaseRunResponse> leased = LeaseNow(worker);
    ASSERT_TRUE(leased.ok()) << leased.status();
    ASSERT_TRUE(leased->has_lease());
    // Grid order: the dense baseline first.
    EXPECT_EQ(leased->run().run_id(), submitted.run_ids(i));
    EXPECT_EQ(leased->run().state(), v1::RUN_STATE_LEASED);
    EXPECT_EQ(leased->lease().lease_epoch(), 1);
    EXPECT_THAT(leased->lease().device_indices(), ElementsAre(0u));
    const std::string run_id = leased->run().run_id();

    v1::HeartbeatRequest heartbeat;
    heartbeat.set_worker_id(worker);
    heartbeat.set_run_id(run_id);
    heartbeat.set_lease_epoch(1);
    heartbeat.set_lease_secret(leased->lease_secret());
    heartbeat.set_step(10);
    heartbeat.mutable_checkpoint()->set_step(10);
    heartbeat.mutable_checkpoint()->set_uri(run_id + "/recorded-1/step-00000010.ckpt");
    absl::StatusOr<v1::HeartbeatResponse> beat = scheduler_->Heartbeat(heartbeat);
    ASSERT_TRUE(beat.ok()) << beat.status();
    EXPECT_FALSE(beat->cancel_requested());

    v1::ReportMetricsRequest metrics;
    metrics.set_run_id(run_id);
    metrics.set_lease_epoch(1);
    metrics.set_lease_secret(leased->lease_secret());
    for (uint64_t step = 1; step <= 10; ++step) *metrics.add_points() = Point(step, 1.5);
    absl::StatusOr<v1::ReportMetricsResponse> stored = scheduler_->ReportMetrics(metrics);
    ASSERT_TRUE(stored.ok()) << stored.status();
    EXPECT_EQ(stored->accepted(), 10u);

    v1::CompleteRunRequest complete;
    complete.set_run_id(run_id);
    complete.set_lease_epoch(1);
    complete.set_lease_secret(leased->lease_secret());
    *complete.mutable_success() = PlannedSummaryOf(run_id, i == 0 ? 1.5 : 1.4);
    complete.mutable_success()->mutable_wall_time()->set_seconds(12);
    absl::StatusOr<v1::CompleteRunResponse> done = scheduler_->CompleteRun(complete);
    ASSERT_TRUE(done.ok()) << done.status();
    EXPECT_EQ(done->run().state(), v1::RUN_STATE_SUCCEEDED);
    EXPECT_EQ(done->run().checkpoint().uri(), run_id + "/recorded-1/step-00000010.ckpt");
    EXPECT_EQ(done->run().latest_step(), 10u);
    EXPECT_DOUBLE_EQ(done->run().latest_val_bpc(), 1.5);
  }
  v1::GetSweepRequest get;
  get.set_sweep_id(submitted.sweep().sweep_id());
  absl::StatusOr<v1::GetSweepResponse> sweep = scheduler_->GetSweep(get);
  ASSERT_TRUE(sweep.ok());
  EXPECT_EQ(sweep->sweep().state(), v1::SWEEP_STATE_SUCCEEDED);
  EXPECT_EQ(sweep->sweep().counts().succeeded(), 2u);

  v1::QueryResultsRequest query;
  query.mutable_filter()->set_sweep_id(submitted.sweep().sweep_id());
  absl::StatusOr<v1::QueryResultsResponse> results = scheduler_->QueryResults(query);
  ASSERT_TRUE(results.ok()) << results.status();
  ASSERT_EQ(results->rows().size(), 2);
  EXPECT_NEAR(results->rows(1).delta_bpc_vs_dense(), -0.1, 1e-9);
  EXPECT_DOUBLE_EQ(results->rows(1).measured_flops_per_token(), results->rows(1).flops_per_token())
      << "an honest summary counts the planned M";
  EXPECT_DOUBLE_EQ(results->rows(1).wall_seconds(), 12);
  // Every state change is an event: created, leased, running, succeeded per run.
  for (const std::string& run_id : submitted.run_ids()) {
    std::vector<v1::RunState> to;
    for (const RunEvent& event : EventsOf(run_id)) to.push_back(event.to_state);
    EXPECT_THAT(to, ElementsAre(v1::RUN_STATE_PENDING, v1::RUN_STATE_LEASED, v1::RUN_STATE_RUNNING,
                                v1::RUN_STATE_SUCCEEDED));
    EXPECT_EQ(PointsOf(run_id), 10u);
  }
}

TEST_F(SchedulerLogicTest, ConcurrentLeasersNeverGetTheSameRun) {
  constexpr int kRuns = 200;
  constexpr int kLeasers = 32;
  const v1::SubmitSweepResponse submitted = Submit(MakeSweepSpec("race", kRuns));
  std::vector<std::string> workers;
  for (int i = 0; i < kLeasers; ++i) workers.push_back(Register());
  absl::Mutex mu;
  std::vector<std::string> leased_ids;
  std::vector<std::thread> threads;
  std::atomic<int> errors{0};
  for (int i = 0; i < kLeasers; ++i) {
    threads.emplace_back([&, i] {
      while (true) {
        absl::StatusOr<v1::LeaseRunResponse> leased = LeaseNow(workers[i]);
        if (!leased.ok()) {
          ++errors;
          return;
        }
        if (!leased->has_lease()) return;
        absl::MutexLock lock(&mu);
        leased_ids.push_back(leased->run().run_id());
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(errors.load(), 0);
  std::set<std::string> unique(leased_ids.begin(), leased_ids.end());
  EXPECT_EQ(leased_ids.size(), static_cast<size_t>(kRuns));
  EXPECT_EQ(unique.size(), static_cast<size_t>(kRuns)) << "a run was leased twice";
  for (const v1::Run& run : RunsOf(submitted.sweep().sweep_id())) {
    EXPECT_EQ(run.lease().lease_epoch(), 1) << "each run leased once: " << run.run_id();
  }
}

TEST_F(SchedulerLogicTest, StaleFencingTokenIsFailedPreconditionAndChangesNothing) {
  const v1::SubmitSweepResponse submitted = Submit(MakeSweepSpec("fence", 1));
  const std::string worker = Register();
  const absl::StatusOr<v1::LeaseRunResponse> first = LeaseNow(worker);
  ASSERT_TRUE(first.ok() && first->has_lease());
  const std::string run_id = submitted.run_ids(0);
  // The lease expires and the run is leased again: epoch 2 now owns it.
  ASSERT_EQ(LetLeasesLapse().requeued, 1);
  ASSERT_EQ(LeaseNow(worker)->lease().lease_epoch(), 2);
  const std::string before = RowOf(run_id);

  v1::ReportMetricsRequest metrics;
  metrics.set_run_id(run_id);
  metrics.set_lease_epoch(1);
  metrics.set_lease_secret(first->lease_secret());
  *metrics.add_points() = Point(1);
  EXPECT_EQ(scheduler_->ReportMetrics(metrics).status().code(),
            absl::StatusCode::kFailedPrecondition);
  v1::HeartbeatRequest heartbeat;
  heartbeat.set_worker_id(worker);
  heartbeat.set_run_id(run_id);
  heartbeat.set_lease_epoch(1);
  heartbeat.set_lease_secret(first->lease_secret());
  heartbeat.set_step(99);
  EXPECT_EQ(scheduler_->Heartbeat(heartbeat).status().code(),
            absl::StatusCode::kFailedPrecondition);
  v1::CompleteRunRequest complete;
  complete.set_run_id(run_id);
  complete.set_lease_epoch(1);
  complete.set_lease_secret(first->lease_secret());
  complete.mutable_success();
  const absl::Status stale = scheduler_->CompleteRun(complete).status();
  EXPECT_EQ(stale.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(stale.GetPayload("type.googleapis.com/google.rpc.PreconditionFailure").has_value());

  EXPECT_EQ(RowOf(run_id), before);
  EXPECT_EQ(PointsOf(run_id), 0u);
}

TEST_F(SchedulerLogicTest, AWriteWithoutTheHoldersLeaseSecretIsPermissionDeniedAndChangesNothing) {
  const v1::SubmitSweepResponse submitted = Submit(MakeSweepSpec("secret", 1));
  const std::string worker = Register();
  const Caller holder{"worker-a", false};
  const absl::StatusOr<v1::LeaseRunResponse> leased =
      scheduler_->LeaseRun(LeaseRequestFor(worker), absl::InfiniteFuture(), {}, holder);
  ASSERT_TRUE(leased.ok() && leased->has_lease()) << leased.status();
  ASSERT_EQ(leased->lease_secret().size(), 43u) << "a 256-bit HMAC, web-safe base64";
  const std::string run_id = submitted.run_ids(0);
  const std::string before = RowOf(run_id);

  // Right run and epoch; no secret, a made-up one, or the holder's secret from another identity.
  const Caller other{"worker-b", false};
  for (const auto& [secret, caller] : {std::pair{std::string(), holder},
                                       {std::string(43, 'A'), holder},
                                       {leased->lease_secret(), other}}) {
    v1::HeartbeatRequest heartbeat;
    heartbeat.set_worker_id(worker);
    heartbeat.set_run_id(run_id);
    heartbeat.set_lease_epoch(1);
    heartbeat.set_lease_secret(secret);
    heartbeat.set_step(50);
    EXPECT_EQ(scheduler_->Heartbeat(heartbeat, caller).status().code(),
              absl::StatusCode::kPermissionDenied);
    v1::ReportMetricsRequest metrics;
    metrics.set_run_id(run_id);
    metrics.set_lease_epoch(1);
    metrics.set_lease_secret(secret);
    *metrics.add_points() = Point(1);
    EXPECT_EQ(scheduler_->ReportMetrics(metrics, caller).status().code(),
              absl::StatusCode::kPermissionDenied);
    v1::CompleteRunRequest complete;
    complete.set_run_id(run_id);
    complete.set_lease_epoch(1);
    complete.set_lease_secret(secret);
    *complete.mutable_success() = PlannedSummaryOf(run_id, 0.5);
    EXPECT_EQ(scheduler_->CompleteRun(complete, caller).status().code(),
              absl::StatusCode::kPermissionDenied);
  }
  EXPECT_EQ(RowOf(run_id), before) << "a refused write must change nothing";
  EXPECT_EQ(PointsOf(run_id), 0u);

  // The holder with its secret still may.
  v1::HeartbeatRequest heartbeat;
  heartbeat.set_worker_id(worker);
  heartbeat.set_run_id(run_id);
  heartbeat.set_lease_epoch(1);
  heartbeat.set_lease_secret(leased->lease_secret());
  EXPECT_TRUE(scheduler_->Heartbeat(heartbeat, holder).ok());
}

TEST_F(SchedulerLogicTest, SameIdempotencyKeyReturnsSameSweepAndOtherSpecIsAlreadyExists) {
  const v1::SubmitSweepResponse first = Submit(MakeSweepSpec("idem", 3), "key-1");
  EXPECT_FALSE(first.deduplicated());
  const v1::SubmitSweepResponse again = Submit(MakeSweepSpec("idem", 3), "key-1");
  EXPECT_TRUE(again.deduplicated());
  EXPECT_EQ(again.sweep().sweep_id(), first.sweep().sweep_id());
  EXPECT_EQ(std::vector<std::string>(again.run_ids().begin(), again.run_ids().end()),
            std::vector<std::string>(first.run_ids().begin(), first.run_ids().end()));
  absl::StatusOr<Page<v1::Sweep>> sweeps = store_.ListSweeps(v1::SWEEP_STATE_UNSPECIFIED, {});
  ASSERT_TRUE(sweeps.ok()) << sweeps.status();
  EXPECT_EQ(sweeps->items.size(), 1u) << "one sweep of 3 runs stored";
  EXPECT_EQ(RunsOf(first.sweep().sweep_id()).size(), 3u);

  v1::SubmitSweepRequest other;
  *other.mutable_spec() = MakeSweepSpec("idem-other", 3);
  other.set_idempotency_key("key-1");
  EXPECT_EQ(scheduler_->SubmitSweep(other).status().code(), absl::StatusCode::kAlreadyExists);
}

TEST_F(SchedulerLogicTest, ResentMetricsWriteNothingTwice) {
  const v1::SubmitSweepResponse submitted = Submit(MakeSweepSpec("resend", 1));
  const absl::StatusOr<v1::LeaseRunResponse> leased = LeaseNow(Register());
  ASSERT_TRUE(leased.ok() && leased->has_lease());
  v1::ReportMetricsRequest metrics;
  metrics.set_run_id(submitted.run_ids(0));
  metrics.set_lease_epoch(1);
  metrics.set_lease_secret(leased->lease_secret());
  for (uint64_t step = 1; step <= 5; ++step) *metrics.add_points() = Point(step);
  ASSERT_EQ(scheduler_->ReportMetrics(metrics)->accepted(), 5u);
  *metrics.add_points() = Point(6);
  absl::StatusOr<v1::ReportMetricsResponse> resent = scheduler_->ReportMetrics(metrics);
  ASSERT_TRUE(resent.ok()) << resent.status();
  EXPECT_EQ(resent->accepted(), 1u);
  EXPECT_EQ(resent->duplicates(), 5u);
  EXPECT_EQ(PointsOf(submitted.run_ids(0)), 6u);
}

TEST_F(SchedulerLogicTest, CancellationReachesTheNextHeartbeat) {
  const v1::SubmitSweepResponse submitted = Submit(MakeSweepSpec("cancel", 3));
  const std::string worker = Register();
  absl::StatusOr<v1::LeaseRunResponse> leased = LeaseNow(worker);
  ASSERT_TRUE(leased->has_lease());
  v1::CancelSweepRequest cancel;
  cancel.set_sweep_id(submitted.sweep().sweep_id());
  cancel.set_reason("user asked");
  absl::StatusOr<v1::CancelSweepResponse> cancelled = scheduler_->CancelSweep(cancel);
  ASSERT_TRUE(cancelled.ok()) << cancelled.status();
  EXPECT_EQ(cancelled->cancelled_runs(), 3u);  // 2 pending cancelled + 1 flagged
  EXPECT_EQ(cancelled->sweep().state(), v1::SWEEP_STATE_CANCELLED);
  EXPECT_EQ(cancelled->sweep().counts().cancelled(), 2u);

  v1::HeartbeatRequest heartbeat;
  heartbeat.set_worker_id(worker);
  heartbeat.set_run_id(leased->run().run_id());
  heartbeat.set_lease_epoch(leased->lease().lease_epoch());
  heartbeat.set_lease_secret(leased->lease_secret());
  absl::StatusOr<v1::HeartbeatResponse> beat = scheduler_->Heartbeat(heartbeat);
  ASSERT_TRUE(beat.ok()) << beat.status();
  EXPECT_TRUE(beat->cancel_requested());
  for (const v1::Run& run : RunsOf(submitted.sweep().sweep_id())) {
    EXPECT_EQ(run.state(), v1::RUN_STATE_CANCELLED) << run.run_id();
  }
  absl::StatusOr<v1::Sweep> sweep = store_.GetSweep(submitted.sweep().sweep_id());
  ASSERT_TRUE(sweep.ok()) << sweep.status();
  EXPECT_TRUE(sweep->has_end_time()) << "the sweep has ended";
  // Cancelling again is idempotent.
  EXPECT_EQ(scheduler_->CancelSweep(cancel)->cancelled_runs(), 0u);
  // Nothing is left to lease.
  EXPECT_FALSE(LeaseNow(worker)->has_lease());
}

TEST_F(SchedulerLogicTest, FailureClassesFollowTheirRetryPolicy) {
  v1::SweepSpec spec = MakeSweepSpec("retry", 1);
  spec.set_max_attempts(2);
  const v1::SubmitSweepResponse submitted = Submit(spec);
  const std::string worker = Register();
  auto fail = [&](v1::FailureClass failure_class) {
    clock_.Advance(options_.retry_policy.backoff_max);  // the longest retry delay passes
    absl::StatusOr<v1::LeaseRunResponse> leased = LeaseNow(worker);
    EXPECT_TRUE(leased.ok() && leased->has_lease()) << leased.status();
    v1::CompleteRunRequest complete;
    complete.set_run_id(submitted.run_ids(0));
    complete.set_lease_epoch(leased->lease().lease_epoch());
    complete.set_lease_secret(leased->lease_secret());
    complete.mutable_failure()->set_failure_class(failure_class);
    complete.mutable_failure()->mutable_status()->set_message("boom");
    absl::StatusOr<v1::CompleteRunResponse> done = scheduler_->CompleteRun(complete);
    EXPECT_TRUE(done.ok()) << done.status();
    // Idempotent for the same epoch.
    EXPECT_EQ(scheduler_->CompleteRun(complete)->run().state(), done->run().state());
    return done->run();
  };
  v1::Run run = fail(v1::FAILURE_CLASS_PREEMPTED);
  EXPECT_EQ(run.state(), v1::RUN_STATE_PENDING);
  EXPECT_EQ(run.attempt(), 1u) << "preemption must not spend an attempt";
  run = fail(v1::FAILURE_CLASS_OUT_OF_MEMORY);
  EXPECT_EQ(run.state(), v1::RUN_STATE_PENDING);
  EXPECT_EQ(run.attempt(), 2u);
  run = fail(v1::FAILURE_CLASS_INFRASTRUCTURE);
  EXPECT_EQ(run.state(), v1::RUN_STATE_FAILED);
  EXPECT_EQ(run.failure_class(), v1::FAILURE_CLASS_INFRASTRUCTURE);
  EXPECT_EQ(run.failure().message(), "boom");
}

TEST_F(SchedulerLogicTest, UserErrorFailsAtOnce) {
  const v1::SubmitSweepResponse submitted = Submit(MakeSweepSpec("user", 1));
  absl::StatusOr<v1::LeaseRunResponse> leased = LeaseNow(Register());
  v1::CompleteRunRequest complete;
  complete.set_run_id(submitted.run_ids(0));
  complete.set_lease_epoch(leased->lease().lease_epoch());
  complete.set_lease_secret(leased->lease_secret());
  complete.mutable_failure()->set_failure_class(v1::FAILURE_CLASS_USER_ERROR);
  EXPECT_EQ(scheduler_->CompleteRun(complete)->run().state(), v1::RUN_STATE_FAILED);
}

// A preempted attempt is free only up to the cap: an engine that keeps exiting "preempted"
// spends attempts past it and ends FAILED, instead of cycling through the queue forever.
TEST_F(SchedulerLogicTest, PreemptionsPastTheCapSpendAttempts) {
  options_.retry_policy.max_preemptions = 2;
  Rewire(&StubPlanner);
  v1::SweepSpec spec = MakeSweepSpec("preempted", 1);
  spec.set_max_attempts(2);
  const v1::SubmitSweepResponse submitted = Submit(spec);
  const std::string worker = Register();
  std::vector<std::pair<uint32_t, uint32_t>> seen;  // (attempt, preemptions) after each
  v1::Run run;
  for (int preemption = 0; preemption < 4; ++preemption) {
    // The longest delay a preemption or a spent attempt waits passes.
    clock_.Advance(
        std::max(options_.retry_policy.preemption_backoff_max, options_.retry_policy.backoff_max));
    absl::StatusOr<v1::LeaseRunResponse> leased = LeaseNow(worker);
    ASSERT_TRUE(leased.ok() && leased->has_lease()) << "preemption " << preemption;
    v1::CompleteRunRequest complete;
    complete.set_run_id(submitted.run_ids(0));
    complete.set_lease_epoch(leased->lease().lease_epoch());
    complete.set_lease_secret(leased->lease_secret());
    complete.mutable_failure()->set_failure_class(v1::FAILURE_CLASS_PREEMPTED);
    absl::StatusOr<v1::CompleteRunResponse> done = scheduler_->CompleteRun(complete);
    ASSERT_TRUE(done.ok()) << done.status();
    run = done->run();
    seen.emplace_back(run.attempt(), run.preemptions());
  }
  const std::vector<std::pair<uint32_t, uint32_t>> expected = {{1, 1}, {1, 2}, {2, 3}, {2, 4}};
  EXPECT_EQ(seen, expected) << "two free preemptions, then each spends an attempt";
  EXPECT_EQ(run.state(), v1::RUN_STATE_FAILED) << "past the cap the last attempt fails the run";
  EXPECT_EQ(run.failure_class(), v1::FAILURE_CLASS_PREEMPTED);
}

// The store refuses a success that disagrees with the plan; the scheduler fails the attempt as
// INVALID_RESULT (never retried) and says why, so a result nobody should plot is never stored.
TEST_F(SchedulerLogicTest, ASuccessOffThePlanFailsAsInvalidResult) {
  const v1::SubmitSweepResponse submitted = Submit(MakeSweepSpec("invalid", 1));
  absl::StatusOr<v1::LeaseRunResponse> leased = LeaseNow(Register());
  ASSERT_TRUE(leased.ok() && leased->has_lease());
  v1::CompleteRunRequest complete;
  complete.set_run_id(submitted.run_ids(0));
  complete.set_lease_epoch(leased->lease().lease_epoch());
  complete.set_lease_secret(leased->lease_secret());
  *complete.mutable_success() = core::PlannedSummary(leased->run().spec(), 1.4, 1.4);
  complete.mutable_success()->set_tokens(leased->run().spec().accounting().tokens() / 2);
  absl::StatusOr<v1::CompleteRunResponse> done = scheduler_->CompleteRun(complete);
  ASSERT_TRUE(done.ok()) << done.status();
  EXPECT_EQ(done->run().state(), v1::RUN_STATE_FAILED);
  EXPECT_EQ(done->run().failure_class(), v1::FAILURE_CLASS_INVALID_RESULT);
  EXPECT_THAT(done->run().failure().message(), ::testing::HasSubstr("tokens 500000, planned"));
  EXPECT_FALSE(done->run().has_summary()) << "the refused summary is not stored";
  v1::QueryResultsRequest results;
  results.mutable_filter()->set_sweep_id(submitted.sweep().sweep_id());
  absl::StatusOr<v1::QueryResultsResponse> rows = scheduler_->QueryResults(results);
  ASSERT_TRUE(rows.ok()) << rows.status();
  ASSERT_EQ(rows->rows_size(), 1);
  EXPECT_EQ(rows->rows(0).final_val_bpc(), 0) << "no result row carries the refused BPC";
  absl::StatusOr<v1::CompleteRunResponse> again = scheduler_->CompleteRun(complete);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->run().state(), v1::RUN_STATE_FAILED) << "a resend changes nothing";
}

// The events half of telemetry retention: an old ended sweep's runs keep only their last event,
// and a live sweep's history is untouched.
TEST_F(SchedulerLogicTest, RetentionCutsAnOldEndedSweepsEventsToEachRunsLast) {
  const v1::SubmitSweepResponse ended = Submit(MakeSweepSpec("events-ended", 2));
  const v1::SubmitSweepResponse live = Submit(MakeSweepSpec("events-live", 1));
  FinishRuns(2);  // the older sweep's runs go first
  auto to_states = [&](const v1::SubmitSweepResponse& sweep) {
    std::vector<v1::RunState> to;
    for (const std::string& run_id : sweep.run_ids()) {
      for (const RunEvent& event : EventsOf(run_id)) to.push_back(event.to_state);
    }
    return to;
  };
  ASSERT_EQ(to_states(ended).size(), 6u)
      << "expected created, leased, succeeded for each run before retention";
  const std::vector<v1::RunState> live_events = to_states(live);
  clock_.Advance(absl::Milliseconds(300));
  RetentionPolicy policy;
  policy.metrics_full = absl::Milliseconds(100);
  policy.events = absl::Milliseconds(100);
  absl::StatusOr<RetentionResult> retained = scheduler_->ApplyRetention(policy);
  ASSERT_TRUE(retained.ok()) << retained.status();
  EXPECT_EQ(retained->sweeps_pruned, 1);
  EXPECT_EQ(retained->events_deleted, 4);
  EXPECT_THAT(to_states(ended), ElementsAre(v1::RUN_STATE_SUCCEEDED, v1::RUN_STATE_SUCCEEDED))
      << "each run keeps how it ended";
  EXPECT_EQ(to_states(live), live_events);
}

TEST_F(SchedulerLogicTest, RunsGoOnlyToWorkersWithTheDevicesTheyNeed) {
  Submit(MakeSweepSpec("gpu", 1, /*gpus=*/2));
  const std::string cpu_worker = Register();
  EXPECT_FALSE(LeaseNow(cpu_worker)->has_lease());
  const std::string one_gpu = Register({GpuDevice(0)});
  EXPECT_FALSE(LeaseNow(one_gpu, {GpuDevice(0)})->has_lease());
  const std::string two_gpus = Register({GpuDevice(0), GpuDevice(1)});
  absl::StatusOr<v1::LeaseRunResponse> leased =
      LeaseNow(two_gpus, {GpuDevice(3, 40ull << 30), GpuDevice(5)});
  ASSERT_TRUE(leased->has_lease());
  EXPECT_THAT(leased->lease().device_indices(), ElementsAre(5u, 3u));
}

// A run the planner sized for a GPU (resources.gpu_memory_bytes per GPU, core/gpu_sizing.h) goes
// only to a worker offering that many free GPUs, each with at least that much memory; the lease
// names the GPUs that have it.
TEST_F(SchedulerLogicTest, GpuRunsGoOnlyToWorkersWithEnoughMemoryOnEnoughFreeGpus) {
  constexpr uint64_t kNeeds = 100ull << 30;
  constexpr uint64_t kH200 = 141'000'000'000, kA100 = 80ull << 30;
  Rewire([](const v1::SweepSpec& spec) {
    absl::StatusOr<std::vector<v1::RunSpec>> runs = StubPlanner(spec);
    for (v1::RunSpec& run : *runs) run.mutable_resources()->set_gpu_memory_bytes(kNeeds);
    return runs;
  });
  Submit(MakeSweepSpec("gpu-memory", 1, /*gpus=*/2));
  const std::string small = Register({GpuDevice(0, kA100), GpuDevice(1, kA100)});
  EXPECT_FALSE(LeaseNow(small, {GpuDevice(0, kA100), GpuDevice(1, kA100)})->has_lease())
      << "two GPUs, neither with 100 GiB";
  const std::string mixed = Register({GpuDevice(0, kH200), GpuDevice(1, kA100)});
  EXPECT_FALSE(LeaseNow(mixed, {GpuDevice(0, kH200), GpuDevice(1, kA100)})->has_lease())
      << "only one of the two GPUs has 100 GiB";
  const std::string busy = Register({GpuDevice(0, kH200), GpuDevice(1, kH200)});
  EXPECT_FALSE(LeaseNow(busy, {GpuDevice(1, kH200)})->has_lease())
      << "one of its two H200s is busy: one free GPU is not two";
  const std::string big = Register({GpuDevice(0, kH200), GpuDevice(1, kA100), GpuDevice(2, kH200)});
  absl::StatusOr<v1::LeaseRunResponse> leased =
      LeaseNow(big, {GpuDevice(0, kH200), GpuDevice(1, kA100), GpuDevice(2, kH200)});
  ASSERT_TRUE(leased.ok() && leased->has_lease()) << leased.status();
  EXPECT_EQ(leased->run().spec().resources().gpu_memory_bytes(), kNeeds);
  EXPECT_THAT(leased->lease().device_indices(), ElementsAre(0u, 2u))
      << "the run gets the two GPUs with enough memory, not the A100";
}

TEST_F(SchedulerLogicTest, FairShareAlternatesBetweenSweepsOfEqualPriority) {
  const v1::SubmitSweepResponse a = Submit(MakeSweepSpec("fair-a", 3));
  const v1::SubmitSweepResponse b = Submit(MakeSweepSpec("fair-b", 3));
  const std::string worker = Register();
  std::vector<std::string> sweeps;
  for (int i = 0; i < 4; ++i) sweeps.push_back(LeaseNow(worker)->run().sweep_id());
  const std::string& ida = a.sweep().sweep_id();
  const std::string& idb = b.sweep().sweep_id();
  EXPECT_THAT(sweeps, ElementsAre(ida, idb, ida, idb));
}

TEST_F(SchedulerLogicTest, HigherPriorityGoesFirst) {
  Submit(MakeSweepSpec("low", 2));
  v1::SweepSpec urgent = MakeSweepSpec("high", 1);
  urgent.set_priority(10);
  const v1::SubmitSweepResponse high = Submit(urgent);
  EXPECT_EQ(LeaseNow(Register())->run().sweep_id(), high.sweep().sweep_id());
}

TEST_F(SchedulerLogicTest, LongPollWakesWhenWorkArrives) {
  const std::string worker = Register();
  options_.idle_poll_interval = absl::Seconds(30);  // only the wake-up can end the wait early
  Rewire(&StubPlanner);
  const absl::Time start = clock_.Now();
  std::thread submitter([&] {
    clock_.AwaitSleeperUntil(start + absl::Seconds(10));  // the call is parked until its wait
    Submit(MakeSweepSpec("wake", 1));
  });
  v1::LeaseRunRequest request = LeaseRequestFor(worker);
  request.mutable_wait_time()->set_seconds(10);
  absl::StatusOr<v1::LeaseRunResponse> leased =
      scheduler_->LeaseRun(request, absl::InfiniteFuture(), {});
  submitter.join();
  ASSERT_TRUE(leased.ok()) << leased.status();
  EXPECT_TRUE(leased->has_lease());
  EXPECT_EQ(clock_.Now(), start) << "the submission woke the call, not its deadline";
}

TEST_F(SchedulerLogicTest, LongPollReturnsEmptyAfterWaitTime) {
  v1::LeaseRunRequest request = LeaseRequestFor(Register());
  request.mutable_wait_time()->set_nanos(200'000'000);
  const absl::Time deadline = clock_.Now() + absl::Milliseconds(200);
  // Idle re-tries every 50 ms until the wait is over, each woken by the clock.
  std::thread time([&] {
    for (absl::Time t = clock_.Now() + options_.idle_poll_interval; t <= deadline;
         t += options_.idle_poll_interval) {
      clock_.AwaitSleeperUntil(t);
      clock_.Advance(t - clock_.Now());
    }
  });
  absl::StatusOr<v1::LeaseRunResponse> leased =
      scheduler_->LeaseRun(request, absl::InfiniteFuture(), {});
  time.join();
  ASSERT_TRUE(leased.ok());
  EXPECT_FALSE(leased->has_lease());
  EXPECT_EQ(clock_.Now(), deadline) << "answered empty at the end of its wait";
}

TEST_F(SchedulerLogicTest, UnknownWorkerIsNotFound) {
  EXPECT_EQ(LeaseNow("00000000-0000-0000-0000-000000000000").status().code(),
            absl::StatusCode::kNotFound);
}

TEST_F(SchedulerLogicTest, InvalidRequestsListEveryViolation) {
  v1::HeartbeatRequest heartbeat;
  heartbeat.set_worker_id("not-a-uuid");
  const absl::Status status = scheduler_->Heartbeat(heartbeat).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  std::vector<std::string> fields;
  for (const core::FieldViolation& v : core::FieldViolationsOf(status)) fields.push_back(v.field);
  EXPECT_THAT(fields, ElementsAre("worker_id", "run_id", "lease_epoch"));
}

}  // namespace
}  // namespace parity::server::testing
