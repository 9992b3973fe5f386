// Scheduler queries, watch streams and the real planner, called directly (no gRPC) on the memory
// store and the fake clock (scheduler_logic_fixture.h): a watch stream polls when the test moves
// the clock past its poll interval, after the stream has gone to sleep.
#include <atomic>
#include <set>
#include <thread>

#include "core/field_violation.h"
#include "core/planner.h"
#include "core/spec_loader.h"
#include "core/summary_check.h"
#include "gmock/gmock.h"
#include "tests/scheduler/scheduler_logic_fixture.h"

namespace parity::server::testing {
namespace {

using ::testing::ElementsAre;

TEST_F(SchedulerLogicTest, ListRunsPagesByKeyset) {
  const v1::SubmitSweepResponse submitted = Submit(MakeSweepSpec("pages", 5));
  v1::ListRunsRequest request;
  request.set_sweep_id(submitted.sweep().sweep_id());
  request.set_page_size(2);
  std::vector<std::string> seen;
  do {
    absl::StatusOr<v1::ListRunsResponse> page = scheduler_->ListRuns(request);
    ASSERT_TRUE(page.ok()) << page.status();
    for (const v1::Run& run : page->runs()) seen.push_back(run.run_id());
    request.set_page_token(page->next_page_token());
  } while (!request.page_token().empty());
  EXPECT_EQ(seen, std::vector<std::string>(submitted.run_ids().begin(), submitted.run_ids().end()));
  request.set_page_token("%%%");
  EXPECT_EQ(scheduler_->ListRuns(request).status().code(), absl::StatusCode::kInvalidArgument);
}

// order_by names a column of the results view (kResultsOrderColumns, shared with the fuzz
// targets' store) and optionally "desc"; anything else is refused before any SQL is built.
TEST_F(SchedulerLogicTest, QueryResultsOrdersByAResultsColumnAndRefusesAnythingElse) {
  const v1::SubmitSweepResponse submitted = Submit(MakeSweepSpec("ordered", 4));
  v1::QueryResultsRequest request;
  request.mutable_filter()->set_sweep_id(submitted.sweep().sweep_id());
  request.set_order_by("name DESC");
  absl::StatusOr<v1::QueryResultsResponse> rows = scheduler_->QueryResults(request);
  ASSERT_TRUE(rows.ok()) << rows.status();
  ASSERT_EQ(rows->rows_size(), 4);
  for (int i = 1; i < rows->rows_size(); ++i) {
    EXPECT_GE(rows->rows(i - 1).name(), rows->rows(i).name());
  }
  for (std::string_view column : kResultsOrderColumns) {
    request.set_order_by(std::string(column));
    EXPECT_TRUE(scheduler_->QueryResults(request).ok()) << column;
  }
  for (const char* bad : {"bogus", "name asc", "name desc extra", "name; DROP TABLE runs"}) {
    request.set_order_by(bad);
    EXPECT_EQ(scheduler_->QueryResults(request).status().code(), absl::StatusCode::kInvalidArgument)
        << bad;
  }
}

TEST_F(SchedulerLogicTest, ListSweepsPagesNewestFirst) {
  for (int i = 0; i < 3; ++i) Submit(MakeSweepSpec(absl::StrCat("s", i), 1));
  v1::ListSweepsRequest request;
  request.set_page_size(2);
  absl::StatusOr<v1::ListSweepsResponse> first = scheduler_->ListSweeps(request);
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_EQ(first->sweeps().size(), 2);
  EXPECT_EQ(first->sweeps(0).spec().name(), "s2");
  request.set_page_token(first->next_page_token());
  absl::StatusOr<v1::ListSweepsResponse> second = scheduler_->ListSweeps(request);
  ASSERT_TRUE(second.ok()) << second.status();
  ASSERT_EQ(second->sweeps().size(), 1);
  EXPECT_EQ(second->sweeps(0).spec().name(), "s0");
  EXPECT_TRUE(second->next_page_token().empty());
}

TEST_F(SchedulerLogicTest, WatchRunStreamsPointsFromAStepAndEndsWithTheRun) {
  const v1::SubmitSweepResponse submitted = Submit(MakeSweepSpec("watch", 1));
  const std::string worker = Register();
  absl::StatusOr<v1::LeaseRunResponse> leased = LeaseNow(worker);
  v1::ReportMetricsRequest metrics;
  metrics.set_run_id(submitted.run_ids(0));
  metrics.set_lease_epoch(1);
  metrics.set_lease_secret(leased->lease_secret());
  for (uint64_t step = 1; step <= 5; ++step) *metrics.add_points() = Point(step);
  ASSERT_TRUE(scheduler_->ReportMetrics(metrics).ok());
  const v1::RunSummary summary = PlannedSummaryOf(submitted.run_ids(0), 1.5);
  std::thread finisher([&] {
    // Once the stream has sent what is stored and gone to sleep, the run ends and time moves.
    clock_.AwaitSleeperUntil(clock_.Now() + options_.watch_poll_interval);
    v1::CompleteRunRequest complete;
    complete.set_run_id(submitted.run_ids(0));
    complete.set_lease_epoch(1);
    complete.set_lease_secret(leased->lease_secret());
    *complete.mutable_success() = summary;
    EXPECT_TRUE(scheduler_->CompleteRun(complete).ok());
    clock_.Advance(options_.watch_poll_interval);
  });
  v1::WatchRunRequest watch;
  watch.set_run_id(submitted.run_ids(0));
  watch.set_from_step(3);
  std::vector<uint64_t> steps;
  std::vector<v1::RunState> states;
  const absl::Status status = scheduler_->WatchRun(watch, {}, [&](const v1::WatchRunResponse& m) {
    if (m.has_metric()) steps.push_back(m.metric().step());
    if (m.has_state_change()) states.push_back(m.state_change().to_state());
    return true;
  });
  finisher.join();
  EXPECT_TRUE(status.ok()) << status;
  EXPECT_THAT(steps, ElementsAre(3u, 4u, 5u));
  EXPECT_THAT(states, ElementsAre(v1::RUN_STATE_LEASED, v1::RUN_STATE_SUCCEEDED));
}

TEST_F(SchedulerLogicTest, StoredPointsReadBackExactlyWhateverTheBatchOrder) {
  // The second run is MoE (L = 4, E = 8): its points may carry expert loads.
  const v1::SubmitSweepResponse submitted = Submit(MakeSweepSpec("exact", 2));
  const std::string worker = Register();
  ASSERT_TRUE(LeaseNow(worker).ok()) << "the dense baseline first, in grid order";
  const absl::StatusOr<v1::LeaseRunResponse> leased = LeaseNow(worker);
  ASSERT_TRUE(leased.ok() && leased->has_lease());
  const std::string run = submitted.run_ids(1);
  ASSERT_EQ(leased->run().run_id(), run);
  // Values whose shortest text is long, tiny or huge; a quote in no field can reach the array
  // literal, but the expert-load JSON is quoted inside it.
  auto point = [](uint64_t step) {
    v1::MetricPoint p = MoePoint(step, step % 2 == 0 ? 1.0 / 3.0 + step : -1);
    p.set_epoch(0.1 * step);
    p.set_grad_norm(1e-300);
    p.set_flops(2.5e300 + step);
    p.set_aux_loss(-0.0);
    p.mutable_expert_load(0)->add_shares(0.30000000000000004);
    p.mutable_time()->set_seconds(1'700'000'000 + static_cast<int64_t>(step));
    p.mutable_time()->set_nanos(123'456'000);
    return p;
  };
  v1::ReportMetricsRequest batch;
  batch.set_run_id(run);
  batch.set_lease_epoch(1);
  batch.set_lease_secret(leased->lease_secret());
  for (uint64_t step : {4, 5, 6}) *batch.add_points() = point(step);  // increasing: no ON CONFLICT
  ASSERT_EQ(scheduler_->ReportMetrics(batch)->accepted(), 3u);
  batch.clear_points();
  for (uint64_t step : {3, 1, 5, 2}) *batch.add_points() = point(step);  // out of order, overlap
  absl::StatusOr<v1::ReportMetricsResponse> mixed = scheduler_->ReportMetrics(batch);
  ASSERT_TRUE(mixed.ok()) << mixed.status();
  EXPECT_EQ(mixed->accepted(), 3u) << "steps 1-3 are new";
  EXPECT_EQ(mixed->duplicates(), 1u) << "step 5 was stored by the first batch";
  batch.clear_points();
  for (uint64_t step : {6, 7}) *batch.add_points() = point(step);  // increasing, but 6 is stored
  EXPECT_EQ(scheduler_->ReportMetrics(batch)->accepted(), 1u);

  absl::StatusOr<std::vector<v1::MetricPoint>> stored = store_.ListMetrics(run, 0, 100);
  ASSERT_TRUE(stored.ok()) << stored.status();
  ASSERT_EQ(stored->size(), 7u);
  for (size_t i = 0; i < stored->size(); ++i) {
    const v1::MetricPoint want = point(i + 1);
    const v1::MetricPoint& got = (*stored)[i];
    EXPECT_EQ(got.step(), want.step());
    EXPECT_EQ(got.epoch(), want.epoch()) << "doubles travel as their shortest exact text";
    EXPECT_EQ(got.grad_norm(), want.grad_norm());
    EXPECT_EQ(got.flops(), want.flops());
    EXPECT_EQ(got.has_val_bpc(), want.has_val_bpc()) << "step " << want.step();
    if (want.has_val_bpc()) {
      EXPECT_EQ(got.val_bpc(), want.val_bpc());
    }
    ASSERT_EQ(got.expert_load_size(), 1);
    EXPECT_THAT(got.expert_load(0).shares(), ElementsAre(0.1, 0.30000000000000004));
    EXPECT_EQ(got.time().seconds(), want.time().seconds());
    EXPECT_EQ(got.time().nanos(), want.time().nanos());
  }
  absl::StatusOr<v1::Run> stored_run = store_.GetRun(run);
  ASSERT_TRUE(stored_run.ok()) << stored_run.status();
  EXPECT_EQ(stored_run->latest_step(), 7u);
  EXPECT_EQ(stored_run->latest_val_bpc(), 1.0 / 3.0 + 6)
      << "the newest validation point stored (step 6; step 7 has none)";
}

TEST_F(SchedulerLogicTest, RealPlannerSweepLandsInRunsWithItsAccounting) {
  absl::StatusOr<v1::SweepSpec> spec = core::LoadSweepSpecFile("examples/micro.yaml");
  ASSERT_TRUE(spec.ok()) << spec.status();
  SchedulerUnderTest scheduler(store_, signal_, clock_, &core::PlanSweep, options_, nullptr);
  v1::SubmitSweepRequest request;
  *request.mutable_spec() = *spec;
  absl::StatusOr<v1::SubmitSweepResponse> submitted = scheduler.SubmitSweep(request);
  ASSERT_TRUE(submitted.ok()) << submitted.status();
  absl::StatusOr<std::vector<v1::RunSpec>> planned = core::PlanSweep(*spec);
  ASSERT_TRUE(planned.ok());
  ASSERT_EQ(submitted->run_ids_size(), static_cast<int>(planned->size()));
  // The accounting columns are the planner's numbers, run by run.
  v1::QueryResultsRequest query;
  query.mutable_filter()->set_sweep_id(submitted->sweep().sweep_id());
  absl::StatusOr<v1::QueryResultsResponse> rows = scheduler.QueryResults(query);
  ASSERT_TRUE(rows.ok()) << rows.status();
  ASSERT_EQ(rows->rows_size(), static_cast<int>(planned->size()));
  for (int i = 0; i < rows->rows_size(); ++i) {
    const v1::Accounting& a = (*planned)[i].accounting();
    EXPECT_EQ(rows->rows(i).name(), (*planned)[i].name());
    EXPECT_EQ(rows->rows(i).params(), a.params());
    EXPECT_EQ(rows->rows(i).active_params(), a.active_params());
    EXPECT_DOUBLE_EQ(rows->rows(i).flops_per_token(), a.flops_per_token());
    EXPECT_EQ(rows->rows(i).tokens(), a.tokens());
    EXPECT_EQ(rows->rows(i).unique_tokens(), a.unique_tokens());
  }
  // An invalid spec is INVALID_ARGUMENT with the planner's violations, and writes nothing.
  request.mutable_spec()->set_name("");
  const absl::Status invalid = scheduler.SubmitSweep(request).status();
  EXPECT_EQ(invalid.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(core::FieldViolationsOf(invalid).empty());
  absl::StatusOr<Page<v1::Sweep>> sweeps = store_.ListSweeps(v1::SWEEP_STATE_UNSPECIFIED, {});
  ASSERT_TRUE(sweeps.ok()) << sweeps.status();
  EXPECT_EQ(sweeps->items.size(), 1u) << "the invalid spec wrote nothing";
}

TEST_F(SchedulerLogicTest, WatchSweepStreamsEveryStateChangeUntilTheSweepEnds) {
  const v1::SubmitSweepResponse submitted = Submit(MakeSweepSpec("watch-sweep", 2));
  std::vector<std::string> changes;  // "run-index:FROM>TO" of the streamed changes
  int metric_points = 0;
  std::atomic<int> snapshot_runs = 0;
  std::atomic<bool> finished = false;
  absl::Status status;
  std::thread watcher([&] {
    v1::WatchSweepRequest watch;
    watch.set_sweep_id(submitted.sweep().sweep_id());
    watch.set_include_metrics(true);
    status = scheduler_->WatchSweep(watch, {}, [&](const v1::WatchSweepResponse& m) {
      if (m.has_metric()) ++metric_points;
      if (m.has_state_change() && m.state_change().from_state() == 0) ++snapshot_runs;
      if (m.has_state_change() && m.state_change().from_state() != 0) {
        const int index = m.state_change().run_id() == submitted.run_ids(0) ? 0 : 1;
        changes.push_back(absl::StrCat(index, ":", m.state_change().from_state(), ">",
                                       m.state_change().to_state()));
      }
      return true;
    });
    finished = true;
  });
  PumpClockUntil([&] { return snapshot_runs == 2; });
  const std::string worker = Register();
  for (int i = 0; i < 2; ++i) {
    absl::StatusOr<v1::LeaseRunResponse> leased = LeaseNow(worker);
    ASSERT_TRUE(leased.ok() && leased->has_lease());
    v1::ReportMetricsRequest metrics;
    metrics.set_run_id(leased->run().run_id());
    metrics.set_lease_epoch(leased->lease().lease_epoch());
    metrics.set_lease_secret(leased->lease_secret());
    *metrics.add_points() = Point(1);
    ASSERT_TRUE(scheduler_->ReportMetrics(metrics).ok());
    v1::CompleteRunRequest complete;
    complete.set_run_id(leased->run().run_id());
    complete.set_lease_epoch(leased->lease().lease_epoch());
    complete.set_lease_secret(leased->lease_secret());
    *complete.mutable_success() = core::PlannedSummary(leased->run().spec(), 1.5, 1.5);
    ASSERT_TRUE(scheduler_->CompleteRun(complete).ok());
  }
  PumpClockUntil([&] { return finished.load(); });  // the watcher sees the sweep end, and returns
  watcher.join();
  EXPECT_TRUE(status.ok()) << status;
  EXPECT_THAT(changes, ElementsAre("0:1>2", "0:2>4", "1:1>2", "1:2>4"));
  EXPECT_EQ(metric_points, 2);
}

// A client that asks for pages gets the opening snapshot as one message per page of 1,000 runs
// (every run once, its state now, no from_state), not one message per run.
TEST_F(SchedulerLogicTest, WatchSweepSendsTheOpeningSnapshotAsPagesWhenAsked) {
  constexpr int kRuns = 1500;
  const v1::SubmitSweepResponse submitted = Submit(MakeSweepSpec("paged-watch", kRuns));
  v1::WatchSweepRequest watch;
  watch.set_sweep_id(submitted.sweep().sweep_id());
  watch.set_snapshot_pages(true);
  std::vector<int> page_sizes;
  std::set<std::string> runs;
  int other_messages = 0;  // besides the opening sweep
  bool saw_sweep = false;
  const absl::Status status =
      scheduler_->WatchSweep(watch, {}, [&](const v1::WatchSweepResponse& m) {
        if (m.has_sweep() && !saw_sweep) {
          saw_sweep = true;
          return true;
        }
        if (!m.has_snapshot()) {
          ++other_messages;
          return true;
        }
        page_sizes.push_back(m.snapshot().runs_size());
        for (const v1::RunStateChange& run : m.snapshot().runs()) {
          EXPECT_EQ(run.to_state(), v1::RUN_STATE_PENDING) << run.run_id();
          EXPECT_EQ(run.from_state(), v1::RUN_STATE_UNSPECIFIED)
              << "a snapshot entry has no before";
          runs.insert(run.run_id());
        }
        return static_cast<int>(runs.size()) < kRuns;  // the whole snapshot: hang up
      });
  EXPECT_EQ(status.code(), absl::StatusCode::kCancelled) << status;
  EXPECT_TRUE(saw_sweep) << "the stream opens with the sweep";
  EXPECT_THAT(page_sizes, ElementsAre(1000, 500)) << "a message per page of 1,000 runs";
  EXPECT_EQ(runs.size(), static_cast<size_t>(kRuns)) << "every run once";
  EXPECT_EQ(other_messages, 0) << "no state_change per run when pages were asked for";
}

}  // namespace
}  // namespace parity::server::testing

namespace parity::server::testing {
namespace {

TEST_F(SchedulerLogicTest, AWatchStreamEndsUnavailableAfterItsLifetimeSoThatClientsReconnect) {
  SchedulerOptions options = options_;
  options.max_watch_duration = absl::Milliseconds(300);
  SchedulerUnderTest scheduler(store_, signal_, clock_, &StubPlanner, options, nullptr);
  const v1::SubmitSweepResponse submitted = Submit(MakeSweepSpec("lifetime", 1));
  v1::WatchSweepRequest watch;
  watch.set_sweep_id(submitted.sweep().sweep_id());
  const absl::Time start = clock_.Now();
  std::atomic<int> messages = 0;
  std::atomic<bool> finished = false;
  absl::Status status;
  std::thread watcher([&] {
    status = scheduler.WatchSweep(watch, {},
                                  [&](const v1::WatchSweepResponse&) { return ++messages > 0; });
    finished = true;
  });
  // Up to just before its lifetime (300 ms of the clock) the stream stays open; at it, it ends.
  PumpClockUntil([&] { return messages > 0; }, absl::ZeroDuration());
  while (clock_.Now() + options.watch_poll_interval < start + options.max_watch_duration) {
    clock_.Advance(options.watch_poll_interval);
    absl::SleepFor(absl::Milliseconds(2));
  }
  absl::SleepFor(absl::Milliseconds(50));
  EXPECT_FALSE(finished) << "the stream ended before its lifetime";
  clock_.Advance(start + options.max_watch_duration - clock_.Now());
  PumpClockUntil([&] { return finished.load(); }, absl::ZeroDuration());
  watcher.join();
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable) << status;
  EXPECT_GT(messages, 0) << "the stream starts with the current state";
  EXPECT_EQ(clock_.Now() - start, options.max_watch_duration) << "ended at its lifetime";
}

}  // namespace
}  // namespace parity::server::testing
