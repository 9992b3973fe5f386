// The ReadModels contract, second half: the counts behind the metrics endpoint, metric listings
// and samples (read_models_contract_test.h includes this file).
#pragma once

#include <set>
#include <tuple>

namespace parity::server::testing {

// Runs by sweep and state: the newest unfinished sweeps one by one, the rest summed under an
// empty id; the runs ready to lease (PENDING, past any delay, of an open sweep); live workers.
TYPED_TEST_P(ReadModelsContractTest, CountsShowTheNewestOpenSweepsTheQueueAndLiveWorkers) {
  const CreatedSweep ended = this->Sweep("counts-ended", 1);
  const std::string worker = this->Worker();
  const LeasedRun done = this->LeaseOne(worker);
  Completion success;
  success.run_id = done.run.run_id();
  success.lease_epoch = done.lease.lease_epoch();
  success.success = core::PlannedSummary(done.run.spec(), 2.0, 2.0);
  ASSERT_TRUE(this->queue().CompleteRun(success).ok());
  const CreatedSweep older = this->Sweep("counts-older", 3);
  const CreatedSweep newer = this->Sweep("counts-newer", 2);
  EXPECT_EQ(this->LeaseOne(worker).run.run_id(), older.run_ids[0]);

  using Row = std::tuple<std::string, std::string, v1::RunState, int64_t>;
  auto rows = [](const RunCounts& counts) {
    std::set<Row> set;
    for (const SweepStateCount& c : counts.by_sweep) {
      set.emplace(c.sweep_id, c.sweep_name, c.state, c.runs);
    }
    return set;
  };
  RunCountsQuery query;
  query.max_sweeps = 1;
  absl::StatusOr<RunCounts> one = this->reads().CountRunsByState(query);
  ASSERT_TRUE(one.ok()) << one.status();
  EXPECT_EQ(rows(*one),
            (std::set<Row>{{newer.sweep.sweep_id(), "counts-newer", v1::RUN_STATE_PENDING, 2},
                           {"", "", v1::RUN_STATE_PENDING, 2},
                           {"", "", v1::RUN_STATE_LEASED, 1},
                           {"", "", v1::RUN_STATE_SUCCEEDED, 1}}));
  EXPECT_EQ(one->ready_to_lease, 4) << "the open sweeps' pending runs";
  EXPECT_EQ(one->live_workers, 1);

  query.max_sweeps = 5;
  absl::StatusOr<RunCounts> all = this->reads().CountRunsByState(query);
  ASSERT_TRUE(all.ok()) << all.status();
  EXPECT_EQ(rows(*all),
            (std::set<Row>{{newer.sweep.sweep_id(), "counts-newer", v1::RUN_STATE_PENDING, 2},
                           {older.sweep.sweep_id(), "counts-older", v1::RUN_STATE_PENDING, 2},
                           {older.sweep.sweep_id(), "counts-older", v1::RUN_STATE_LEASED, 1},
                           {"", "", v1::RUN_STATE_SUCCEEDED, 1}}))
      << "an ended sweep is never shown on its own";
  (void)ended;

  this->harness_.LetTimePass(absl::Milliseconds(400));
  query.live_worker_window = absl::Milliseconds(200);
  absl::StatusOr<RunCounts> later = this->reads().CountRunsByState(query);
  ASSERT_TRUE(later.ok()) << later.status();
  EXPECT_EQ(later->live_workers, 0) << "not seen within the window";
  query.max_sweeps = -1;
  EXPECT_EQ(this->reads().CountRunsByState(query).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TYPED_TEST_P(ReadModelsContractTest, ARetryingRunIsNotReadyToLeaseUntilItsDelayPasses) {
  this->Sweep("counts-retry", 1);
  const LeasedRun leased = this->LeaseOne(this->Worker());
  Completion failure;
  failure.run_id = leased.run.run_id();
  failure.lease_epoch = leased.lease.lease_epoch();
  failure.failure_class = v1::FAILURE_CLASS_INFRASTRUCTURE;
  failure.retry = {v1::RUN_STATE_PENDING, 2, absl::Milliseconds(300)};
  failure.decided_at_attempt = 1;
  ASSERT_TRUE(this->queue().CompleteRun(failure).ok());
  absl::StatusOr<RunCounts> waiting = this->reads().CountRunsByState(RunCountsQuery());
  ASSERT_TRUE(waiting.ok()) << waiting.status();
  EXPECT_EQ(waiting->ready_to_lease, 0) << "the retry delay has not passed";
  this->harness_.LetTimePass(absl::Milliseconds(600));
  absl::StatusOr<RunCounts> ready = this->reads().CountRunsByState(RunCountsQuery());
  ASSERT_TRUE(ready.ok()) << ready.status();
  EXPECT_EQ(ready->ready_to_lease, 1);
}

// A run's points from a step, as they were sent (every field, the run id set), by step.
TYPED_TEST_P(ReadModelsContractTest, MetricsAreListedFromAStepAsTheyWereSent) {
  this->Sweep("list-metrics", 1);
  const LeasedRun leased = this->LeaseOne(this->Worker());
  const std::string run = leased.run.run_id();
  const std::vector<v1::MetricPoint> curve = this->Curve();
  ASSERT_TRUE(this->queue().AppendMetrics(run, leased.lease.lease_epoch(), curve).ok());
  absl::StatusOr<std::vector<v1::MetricPoint>> listed = this->reads().ListMetrics(run, 50, 10);
  ASSERT_TRUE(listed.ok()) << listed.status();
  ASSERT_EQ(listed->size(), 10u);
  for (size_t i = 0; i < listed->size(); ++i) {
    v1::MetricPoint expected = curve[50 + i];
    expected.set_run_id(run);
    EXPECT_EQ((*listed)[i].DebugString(), expected.DebugString()) << "step " << 50 + i;
  }
  absl::StatusOr<std::vector<v1::MetricPoint>> tail = this->reads().ListMetrics(run, 95, 100);
  ASSERT_TRUE(tail.ok()) << tail.status();
  EXPECT_EQ(tail->size(), 5u);
  absl::StatusOr<std::vector<v1::MetricPoint>> unknown =
      this->reads().ListMetrics("7a1c3f6e-0000-4000-8000-0000000000ff", 0, 100);
  ASSERT_TRUE(unknown.ok()) << unknown.status();
  EXPECT_TRUE(unknown->empty());
}

// Sampling: the first point at or after each of 0, s, 2s, ... up to the run's latest step
// (s = ceil((latest + 1) / max_points)) and the last point; by run id, then step; expert load
// left out or reduced to its summaries; evaluations only when asked; unknown runs give nothing.
TYPED_TEST_P(ReadModelsContractTest, SamplesPickTheSqlsPointsByRunThenStep) {
  this->Sweep("sample-metrics", 2);
  const std::string worker = this->Worker();
  const LeasedRun a = this->LeaseOne(worker);
  const LeasedRun b = this->LeaseOne(worker);
  ASSERT_TRUE(
      this->queue().AppendMetrics(a.run.run_id(), a.lease.lease_epoch(), this->Curve()).ok());
  std::vector<v1::MetricPoint> sparse = this->Curve(30);  // latest step 30: s = 7 at 5 points
  ASSERT_TRUE(this->queue().AppendMetrics(b.run.run_id(), b.lease.lease_epoch(), sparse).ok());
  const std::string unknown = "7a1c3f6e-0000-4000-8000-000000000100";
  auto sample = [&](const ReadModels::MetricSampling& sampling) {
    absl::StatusOr<std::vector<v1::MetricPoint>> points = this->reads().SampleMetrics(
        {b.run.run_id(), unknown, a.run.run_id(), b.run.run_id()}, sampling);
    EXPECT_TRUE(points.ok()) << points.status();
    std::map<std::string, std::vector<uint64_t>> steps;
    std::vector<std::string> run_order;
    for (const v1::MetricPoint& point : points.ok() ? *points : std::vector<v1::MetricPoint>()) {
      if (run_order.empty() || run_order.back() != point.run_id())
        run_order.push_back(point.run_id());
      steps[point.run_id()].push_back(point.step());
    }
    EXPECT_TRUE(std::is_sorted(run_order.begin(), run_order.end())) << "by run id";
    EXPECT_EQ(run_order.size(), steps.size()) << "each run once, its points together";
    return std::make_pair(steps, points.ok() ? *points : std::vector<v1::MetricPoint>());
  };
  ReadModels::MetricSampling sampling;
  sampling.max_points_per_run = 10;
  auto [steps, points] = sample(sampling);
  EXPECT_THAT(steps[a.run.run_id()],
              ::testing::ElementsAre(0, 10, 20, 30, 40, 50, 60, 70, 80, 90, 99));
  sampling.max_points_per_run = 5;
  std::tie(steps, points) = sample(sampling);
  EXPECT_THAT(steps[b.run.run_id()], ::testing::ElementsAre(0, 7, 14, 21, 28, 30));
  EXPECT_FALSE(steps.contains(unknown));
  for (const v1::MetricPoint& point : points) {
    EXPECT_EQ(point.expert_load_size(), 0) << "no expert load unless asked";
  }

  sampling.max_points_per_run = 10;
  sampling.validation_only = true;
  sampling.expert_load_summaries = true;
  std::tie(steps, points) = sample(sampling);
  EXPECT_THAT(steps[a.run.run_id()], ::testing::ElementsAre(0, 10, 20, 30, 40, 50, 60, 70, 80, 90))
      << "evaluations only; the last is the last evaluation";
  EXPECT_THAT(steps[b.run.run_id()], ::testing::ElementsAre(0, 10, 20, 30));
  for (const v1::MetricPoint& point : points) {
    ASSERT_EQ(point.expert_load_size(), 1);
    EXPECT_EQ(point.expert_load(0).shares_size(), 0) << "summaries without the shares";
    EXPECT_DOUBLE_EQ(point.expert_load(0).max_share(), 0.3);
    EXPECT_TRUE(point.has_val_bpc());
  }
  absl::StatusOr<std::vector<v1::MetricPoint>> none = this->reads().SampleMetrics({}, sampling);
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_TRUE(none->empty());
}

}  // namespace parity::server::testing
