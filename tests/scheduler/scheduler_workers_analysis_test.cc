// ListWorkers, AnalyzeSweep and the ResourceInfo of NOT_FOUND, called directly on the scheduling
// units over the memory store; workers age on the fake clock (scheduler_logic_fixture.h). The
// analysis sweep (scheduler_specs.h) has a known answer: dense law 10·C^-0.05 + 0.5, MoE runs at
// r_a = 0.2 worth 2× compute.
#include <cmath>

#include "gmock/gmock.h"
#include "google/rpc/error_details.pb.h"
#include "tests/scheduler/scheduler_logic_fixture.h"

namespace parity::server::testing {
namespace {

using ::testing::ElementsAre;
using ::testing::UnorderedElementsAre;

std::optional<google::rpc::ResourceInfo> ResourceInfoOf(const absl::Status& status) {
  auto payload = status.GetPayload("type.googleapis.com/google.rpc.ResourceInfo");
  if (!payload) return std::nullopt;
  google::rpc::ResourceInfo info;
  if (!info.ParseFromString(std::string(*payload))) return std::nullopt;
  return info;
}

std::optional<google::rpc::PreconditionFailure> PreconditionOf(const absl::Status& status) {
  auto payload = status.GetPayload("type.googleapis.com/google.rpc.PreconditionFailure");
  if (!payload) return std::nullopt;
  google::rpc::PreconditionFailure failure;
  if (!failure.ParseFromString(std::string(*payload))) return std::nullopt;
  return failure;
}

TEST_F(SchedulerLogicTest, ListWorkersMostRecentFirstWithActiveRunsAndPages) {
  Submit(MakeSweepSpec("workers", 2));
  // Seen in this order, 10 s apart: idle_b 20 s ago, idle_a 10 s ago, busy now.
  const std::string idle_b = Register({CpuDevice(4), GpuDevice(0)});
  clock_.Advance(absl::Seconds(10));
  const std::string idle_a = Register();
  clock_.Advance(absl::Seconds(10));
  const std::string busy = Register();
  ASSERT_TRUE(LeaseNow(busy).ok());
  ASSERT_TRUE(LeaseNow(busy).ok());

  v1::ListWorkersRequest request;
  request.set_page_size(2);
  std::vector<std::string> ids;
  std::vector<uint32_t> active;
  int pages = 0;
  do {
    absl::StatusOr<v1::ListWorkersResponse> page = scheduler_->ListWorkers(request);
    ASSERT_TRUE(page.ok()) << page.status();
    for (const v1::Worker& worker : page->workers()) {
      ids.push_back(worker.worker_id());
      active.push_back(worker.active_runs());
      EXPECT_EQ(worker.hostname(), "test-host");
      EXPECT_GT(worker.last_seen_time().seconds(), 0);
      if (worker.worker_id() == idle_b) {
        ASSERT_EQ(worker.devices_size(), 2);
        EXPECT_EQ(worker.devices(1).kind(), v1::DEVICE_KIND_CUDA);
        EXPECT_EQ(worker.devices(1).memory_bytes(), 80ull << 30);
      }
    }
    request.set_page_token(page->next_page_token());
    ++pages;
  } while (!request.page_token().empty());
  EXPECT_EQ(pages, 2);
  EXPECT_THAT(ids, ElementsAre(busy, idle_a, idle_b));
  EXPECT_THAT(active, ElementsAre(2u, 0u, 0u));
}

TEST_F(SchedulerLogicTest, ListWorkersLeavesOutWorkersNotSeenWithinTheWindow) {
  const std::string stale = Register();
  clock_.Advance(absl::Hours(1));
  const std::string recent = Register();
  v1::ListWorkersRequest request;  // default window: 300 s
  absl::StatusOr<v1::ListWorkersResponse> listed = scheduler_->ListWorkers(request);
  ASSERT_TRUE(listed.ok()) << listed.status();
  ASSERT_EQ(listed->workers_size(), 1);
  EXPECT_EQ(listed->workers(0).worker_id(), recent);
  EXPECT_TRUE(listed->next_page_token().empty());
  request.set_seen_within_seconds(7200);
  listed = scheduler_->ListWorkers(request);
  ASSERT_TRUE(listed.ok()) << listed.status();
  EXPECT_EQ(listed->workers_size(), 2);
}

TEST_F(SchedulerLogicTest, HeartbeatCountsAsSeen) {
  options_.lease_ttl = absl::Hours(2);  // the lease outlives the hour the worker is not seen
  Rewire(&StubPlanner);
  Submit(MakeSweepSpec("heartbeat-seen", 1));
  const std::string worker = Register();
  absl::StatusOr<v1::LeaseRunResponse> leased = LeaseNow(worker);
  ASSERT_TRUE(leased.ok() && leased->has_lease());
  clock_.Advance(absl::Hours(1));
  absl::StatusOr<v1::ListWorkersResponse> unseen = scheduler_->ListWorkers({});
  ASSERT_TRUE(unseen.ok()) << unseen.status();
  EXPECT_EQ(unseen->workers_size(), 0) << "not seen for an hour";
  v1::HeartbeatRequest heartbeat;
  heartbeat.set_worker_id(worker);
  heartbeat.set_run_id(leased->run().run_id());
  heartbeat.set_lease_epoch(leased->lease().lease_epoch());
  heartbeat.set_lease_secret(leased->lease_secret());
  ASSERT_TRUE(scheduler_->Heartbeat(heartbeat).ok());
  absl::StatusOr<v1::ListWorkersResponse> listed = scheduler_->ListWorkers({});
  ASSERT_TRUE(listed.ok()) << listed.status();
  ASSERT_EQ(listed->workers_size(), 1);
  EXPECT_EQ(listed->workers(0).active_runs(), 1u);
}

TEST_F(SchedulerLogicTest, ListWorkersRejectsBadPageTokenAndSize) {
  v1::ListWorkersRequest request;
  request.set_page_token("%%%");
  EXPECT_EQ(scheduler_->ListWorkers(request).status().code(), absl::StatusCode::kInvalidArgument);
  request.set_page_token("");
  request.set_page_size(1001);
  const absl::Status status = scheduler_->ListWorkers(request).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  ASSERT_EQ(core::FieldViolationsOf(status).size(), 1u);
  EXPECT_EQ(core::FieldViolationsOf(status)[0].field, "page_size");
}

TEST_F(SchedulerLogicTest, AnalyzeSweepRecoversAKnownLawLeverageAndOptimum) {
  const v1::SubmitSweepResponse submitted = Submit(AnalysisSweepSpec("analysis"));
  ASSERT_EQ(submitted.run_ids_size(), kAnalysisSweepRuns);
  FinishRuns(kAnalysisSweepRuns);
  v1::AnalyzeSweepRequest request;
  request.set_sweep_id(submitted.sweep().sweep_id());
  absl::StatusOr<v1::AnalyzeSweepResponse> analysis = scheduler_->AnalyzeSweep(request);
  ASSERT_TRUE(analysis.ok()) << analysis.status();

  // Three budgets, three runs: the law is recovered, with no residual left for an interval.
  const v1::DenseComputeFit& law = analysis->dense_fit();
  EXPECT_TRUE(analysis->dense_fit_refusal().empty()) << analysis->dense_fit_refusal();
  EXPECT_NEAR(law.a() / kLawA, 1.0, 0.02);
  EXPECT_NEAR(law.b(), kLawB, 1e-3);
  EXPECT_NEAR(law.c(), kLawC, 0.02);
  EXPECT_EQ(law.points(), 3u);
  EXPECT_EQ(law.budgets(), 3u);
  EXPECT_FALSE(law.has_b_interval());
  EXPECT_THAT(law.interval_note(), ::testing::HasSubstr("no residual"));

  ASSERT_EQ(analysis->leverage_size(), 7);
  std::map<std::string, const v1::RunLeverage*> leverage;
  for (const v1::RunLeverage& run : analysis->leverage()) {
    leverage[run.name()] = &run;
    EXPECT_EQ(run.predicted_efficiency_leverage(), 1.5) << run.name();
    EXPECT_GT(run.efficiency_leverage(), 0)
        << run.name() << ": " << run.efficiency_leverage_missing();
  }
  EXPECT_NEAR(leverage["moe-r0.2-strict"]->efficiency_leverage(), 2.0, 0.05)
      << "loss = dense law at 2× its compute";
  EXPECT_GT(leverage["moe-r0.2-s1"]->efficiency_leverage(),
            leverage["moe-r0.2-s0"]->efficiency_leverage())
      << "the seed with the lower loss needs more dense compute to match";
  EXPECT_LT(leverage["moe-r0.4-s0"]->efficiency_leverage(), 2.0);
  EXPECT_THAT(analysis->efficiency_leverage_law_refusal(), ::testing::HasSubstr("granularities"));
  EXPECT_FALSE(analysis->has_efficiency_leverage_law());

  // "unique": both ends significantly above the best r_a = 0.2, but three r_a leave no degree of
  // freedom to test the quadratic's fit, so no point optimum (FIT_UNCHECKED) and why; "strict":
  // one r_a, so no optimum and why.
  ASSERT_EQ(analysis->optimal_activation_size(), 2);
  const v1::OptimalActivation& optimum = analysis->optimal_activation(0);
  EXPECT_EQ(optimum.compute_budget(), "C1");
  EXPECT_EQ(optimum.data_variant(), "unique");
  EXPECT_EQ(optimum.status(), v1::OPTIMUM_STATUS_FIT_UNCHECKED) << optimum.reason();
  EXPECT_THAT(optimum.reason(), ::testing::HasSubstr("cannot be checked"));
  EXPECT_EQ(optimum.activation_rate(), 0) << "a point optimum only when BRACKETED";
  EXPECT_FALSE(optimum.has_activation_rate_interval());
  EXPECT_EQ(optimum.lack_of_fit().verdict(), v1::LACK_OF_FIT_VERDICT_UNTESTED);
  EXPECT_NE(optimum.lack_of_fit().note(), "");
  EXPECT_EQ(optimum.resamples(), 0u) << "superseded: the bracket needs no bootstrap";
  EXPECT_FALSE(optimum.has_bpc_interval()) << "superseded: always unset";
  EXPECT_DOUBLE_EQ(optimum.best_grid_activation_rate(), 0.2);
  EXPECT_NEAR(optimum.best_grid_bpc(), DenseLaw(2e15), 1e-12);
  EXPECT_EQ(optimum.points(), 6u);
  EXPECT_EQ(optimum.rates(), 3u);
  const v1::OptimalActivation& strict = analysis->optimal_activation(1);
  EXPECT_EQ(strict.status(), v1::OPTIMUM_STATUS_TOO_FEW_RATES);
  EXPECT_THAT(strict.reason(), ::testing::HasSubstr("≥ 3 distinct r_a"));
  EXPECT_EQ(strict.activation_rate(), 0);

  // The papers' answer beside it: the grid with P(best) and region status, the region, the test.
  EXPECT_EQ(optimum.group(), "C1/unique");
  ASSERT_EQ(optimum.grid_size(), 3);
  EXPECT_EQ(optimum.probability_resamples(), 2000u);
  double total = 0;
  for (const v1::RatePoint& p : optimum.grid()) total += p.probability_best();
  EXPECT_NEAR(total, 1.0, 1e-9) << "P(best) over the grid sums to 1";
  EXPECT_EQ(optimum.grid(1).region(), v1::REGION_STATUS_BEST);
  EXPECT_FALSE(optimum.grid(1).has_p_value_above_best()) << "the best is not tested against itself";
  for (int end : {0, 2}) {
    EXPECT_EQ(optimum.grid(end).region(), v1::REGION_STATUS_OUTSIDE) << "both ends above the best";
    EXPECT_TRUE(optimum.grid(end).has_p_value_above_best());
  }
  ASSERT_TRUE(optimum.has_region()) << optimum.region_note();
  EXPECT_DOUBLE_EQ(optimum.region().low(), 0.2);
  EXPECT_DOUBLE_EQ(optimum.region().high(), 0.2);
  EXPECT_THAT(optimum.region_note(), ::testing::HasSubstr("Welch"));
  EXPECT_EQ(optimum.lack_of_fit().test_level(), 0.1);

  // Grid points: the 1C baseline is the reference; r_a = 0.2 beats it by more than its spread.
  ASSERT_EQ(analysis->grid_points_size(), 7);
  EXPECT_EQ(analysis->grid_points(0).name(), "dense-1C");
  EXPECT_EQ(analysis->grid_points(0).verdict(), v1::DELTA_VERDICT_IS_BASELINE);
  const v1::GridPointSummary& best = analysis->grid_points(4);
  EXPECT_EQ(best.name(), "moe-r0.2");
  EXPECT_EQ(best.seeds(), 2u);
  EXPECT_NEAR(best.bpc_mean(), DenseLaw(2e15), 1e-12);
  EXPECT_NEAR(best.bpc_spread(), kSeedOffset * std::sqrt(2.0), 1e-12);
  EXPECT_NEAR(best.delta_bpc(), DenseLaw(2e15) - DenseLaw(1e15), 1e-12);
  EXPECT_EQ(best.verdict(), v1::DELTA_VERDICT_EXCEEDS_SPREAD);
  EXPECT_EQ(analysis->grid_points(6).verdict(), v1::DELTA_VERDICT_NO_BASELINE)
      << "the strict group has no dense baseline";

  // ΔBPC against every dense baseline of the group; one dense seed, so no Welch test.
  ASSERT_EQ(best.baselines_size(), 3) << "dense 1C, 2C and 4C";
  EXPECT_EQ(best.baselines(0).baseline(), "dense-1C");
  EXPECT_EQ(best.baselines(0).compute_multiple(), 1);
  EXPECT_NEAR(best.baselines(0).delta_bpc(), best.delta_bpc(), 1e-12);
  EXPECT_NEAR(best.baselines(1).delta_bpc(), 0, 1e-9) << "the MoE loss is the dense law at 2C";
  EXPECT_FALSE(best.baselines(0).has_welch_p()) << "one dense seed: no Welch test";
  // One dense size per budget: the frontier is the fixed-N law, and both ELs are 2.
  ASSERT_TRUE(analysis->has_dense_frontier()) << analysis->dense_frontier_refusal();
  EXPECT_EQ(analysis->dense_frontier().points_size(), 3);
  EXPECT_EQ(analysis->dense_frontier().points(0).sizes(), 1u);
  EXPECT_TRUE(analysis->dense_frontier().has_law()) << analysis->dense_frontier().law_refusal();
  EXPECT_EQ(analysis->dense_fit_params(), analysis->grid_points(0).params());
  ASSERT_TRUE(best.has_frontier_leverage() && best.has_fixed_n_leverage());
  EXPECT_NEAR(best.frontier_leverage().value(), 2.0, 0.05)
      << best.frontier_leverage().missing_reason();
  EXPECT_NEAR(best.fixed_n_leverage().value(), best.frontier_leverage().value(), 1e-9);
  EXPECT_FALSE(best.frontier_leverage().extrapolated()) << "2C lies inside the dense 1C–4C range";
  EXPECT_FALSE(analysis->grid_points(0).has_frontier_leverage()) << "a dense point has no EL";
}

TEST_F(SchedulerLogicTest, AnalyzeSweepSaysWhatItCannotFitYet) {
  const v1::SubmitSweepResponse submitted = Submit(AnalysisSweepSpec("too-early"));
  v1::AnalyzeSweepRequest request;
  request.set_sweep_id(submitted.sweep().sweep_id());
  const absl::Status none = scheduler_->AnalyzeSweep(request).status();
  EXPECT_EQ(none.code(), absl::StatusCode::kFailedPrecondition) << none;
  std::optional<google::rpc::PreconditionFailure> failure = PreconditionOf(none);
  ASSERT_TRUE(failure.has_value()) << "expected a PreconditionFailure detail: " << none;
  ASSERT_EQ(failure->violations_size(), 1);
  EXPECT_EQ(failure->violations(0).type(), "FINISHED_RUNS");
  EXPECT_EQ(failure->violations(0).subject(), "sweeps/" + submitted.sweep().sweep_id());

  FinishRuns(2);  // grid order: dense-1C and dense-2C finish
  absl::StatusOr<v1::AnalyzeSweepResponse> analysis = scheduler_->AnalyzeSweep(request);
  ASSERT_TRUE(analysis.ok()) << analysis.status();
  EXPECT_FALSE(analysis->has_dense_fit()) << "two budgets cannot identify a, b and c";
  EXPECT_THAT(analysis->dense_fit_refusal(), ::testing::HasSubstr("span 2 budgets"));
  EXPECT_EQ(analysis->leverage_size(), 0);
  EXPECT_EQ(analysis->grid_points_size(), 2);

  // The answer is kept per count of SUCCEEDED runs (analysis_cache.h): asked again, the same;
  // once another run succeeds, the new run is in it.
  absl::StatusOr<v1::AnalyzeSweepResponse> again = scheduler_->AnalyzeSweep(request);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->SerializeAsString(), analysis->SerializeAsString());
  FinishRuns(1);
  absl::StatusOr<v1::AnalyzeSweepResponse> moved = scheduler_->AnalyzeSweep(request);
  ASSERT_TRUE(moved.ok()) << moved.status();
  EXPECT_EQ(moved->grid_points_size(), 3) << "the third finished run's grid point is analysed";
}

TEST_F(SchedulerLogicTest, AnalyzeSweepUnknownIsNotFoundWithResourceInfo) {
  v1::AnalyzeSweepRequest request;
  request.set_sweep_id("00000000-0000-0000-0000-000000000042");
  const absl::Status status = scheduler_->AnalyzeSweep(request).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound);
  std::optional<google::rpc::ResourceInfo> info = ResourceInfoOf(status);
  ASSERT_TRUE(info.has_value()) << "expected a ResourceInfo detail: " << status;
  EXPECT_EQ(info->resource_type(), "parity.v1.Sweep");
  EXPECT_EQ(info->resource_name(), "sweeps/00000000-0000-0000-0000-000000000042");
  request.set_sweep_id("nope");
  EXPECT_EQ(scheduler_->AnalyzeSweep(request).status().code(), absl::StatusCode::kInvalidArgument);

  v1::GetRunRequest get_run;
  get_run.set_run_id("00000000-0000-0000-0000-000000000043");
  info = ResourceInfoOf(scheduler_->GetRun(get_run).status());
  ASSERT_TRUE(info.has_value());
  EXPECT_EQ(info->resource_type(), "parity.v1.Run");
  EXPECT_EQ(info->resource_name(), "runs/00000000-0000-0000-0000-000000000043");
}

}  // namespace
}  // namespace parity::server::testing
