// ListWorkers, AnalyzeSweep and the ResourceInfo of NOT_FOUND, called directly on the Scheduler
// over a fresh migrated PostgreSQL database per test. The analysis sweep (scheduler_fixture.h)
// has a known answer: dense law 10·C^-0.05, MoE runs at r_a = 0.2 worth exactly 2× compute.
#include <cmath>

#include "gmock/gmock.h"
#include "google/rpc/error_details.pb.h"
#include "tests/scheduler/scheduler_fixture.h"

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

TEST_F(SchedulerTest, ListWorkersMostRecentFirstWithActiveRunsAndPages) {
  Submit(MakeSweepSpec("workers", 2));
  const std::string idle_a = Register();
  const std::string idle_b = Register({CpuDevice(4), GpuDevice(0)});
  const std::string busy = Register();
  ASSERT_TRUE(LeaseNow(busy).ok());
  ASSERT_TRUE(LeaseNow(busy).ok());
  // Make the order deterministic: idle_a seen 10 s ago, idle_b 20 s ago.
  Sql(database_url_, absl::StrCat("UPDATE workers SET last_seen_at = now() - interval '10 s' "
                                  "WHERE worker_id = '",
                                  idle_a, "'"));
  Sql(database_url_, absl::StrCat("UPDATE workers SET last_seen_at = now() - interval '20 s' "
                                  "WHERE worker_id = '",
                                  idle_b, "'"));

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

TEST_F(SchedulerTest, ListWorkersLeavesOutWorkersNotSeenWithinTheWindow) {
  const std::string recent = Register();
  const std::string stale = Register();
  Sql(database_url_, absl::StrCat("UPDATE workers SET last_seen_at = now() - interval '1 hour' "
                                  "WHERE worker_id = '",
                                  stale, "'"));
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

TEST_F(SchedulerTest, HeartbeatCountsAsSeen) {
  Submit(MakeSweepSpec("heartbeat-seen", 1));
  const std::string worker = Register();
  absl::StatusOr<v1::LeaseRunResponse> leased = LeaseNow(worker);
  ASSERT_TRUE(leased.ok() && leased->has_lease());
  Sql(database_url_, "UPDATE workers SET last_seen_at = now() - interval '1 hour'");
  v1::HeartbeatRequest heartbeat;
  heartbeat.set_worker_id(worker);
  heartbeat.set_run_id(leased->run().run_id());
  heartbeat.set_lease_epoch(leased->lease().lease_epoch());
  ASSERT_TRUE(scheduler_->Heartbeat(heartbeat).ok());
  absl::StatusOr<v1::ListWorkersResponse> listed = scheduler_->ListWorkers({});
  ASSERT_TRUE(listed.ok()) << listed.status();
  ASSERT_EQ(listed->workers_size(), 1);
  EXPECT_EQ(listed->workers(0).active_runs(), 1u);
}

TEST_F(SchedulerTest, ListWorkersRejectsBadPageTokenAndSize) {
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

TEST_F(SchedulerTest, AnalyzeSweepRecoversAKnownLawLeverageAndOptimum) {
  const v1::SubmitSweepResponse submitted = Submit(AnalysisSweepSpec("analysis"));
  ASSERT_EQ(submitted.run_ids_size(), kAnalysisSweepRuns);
  FinishRuns(kAnalysisSweepRuns);
  v1::AnalyzeSweepRequest request;
  request.set_sweep_id(submitted.sweep().sweep_id());
  absl::StatusOr<v1::AnalyzeSweepResponse> analysis = scheduler_->AnalyzeSweep(request);
  ASSERT_TRUE(analysis.ok()) << analysis.status();

  // Two budgets: a pure power law, recovered exactly.
  EXPECT_NEAR(analysis->dense_fit().a(), kLawA, 1e-6 * kLawA);
  EXPECT_NEAR(analysis->dense_fit().b(), kLawB, 1e-9);
  EXPECT_EQ(analysis->dense_fit().c(), 0);
  EXPECT_EQ(analysis->dense_fit().points(), 2u);
  EXPECT_LT(analysis->dense_fit().rms_residual(), 1e-9);

  ASSERT_EQ(analysis->leverage_size(), 4);
  std::map<std::string, double> leverage;
  for (const v1::RunLeverage& run : analysis->leverage()) {
    leverage[run.name()] = run.efficiency_leverage();
    EXPECT_EQ(run.predicted_efficiency_leverage(), 1.5) << run.name();
  }
  EXPECT_NEAR(leverage["moe-r0.2"], 2.0, 1e-6) << "loss = dense law at 2× its compute";
  EXPECT_NEAR(leverage["moe-r0.2-strict"], 2.0, 1e-6);
  // Off the optimum the loss is higher, so a dense model needs less compute to match it.
  const double off = DenseLaw(2e15) + 0.05 * std::log(2.0) * std::log(2.0);
  EXPECT_NEAR(leverage["moe-r0.1"], std::pow(kLawA / off, 1 / kLawB) / 1e15, 1e-4);
  EXPECT_LT(leverage["moe-r0.4"], 2.0);

  // Only the "unique" group has ≥ 3 MoE runs; its parabola's minimum is at r_a = 0.2.
  ASSERT_EQ(analysis->optimal_activation_size(), 1);
  const v1::OptimalActivation& optimum = analysis->optimal_activation(0);
  EXPECT_EQ(optimum.compute_budget(), "C1");
  EXPECT_EQ(optimum.data_variant(), "unique");
  EXPECT_NEAR(optimum.activation_rate(), 0.2, 1e-6);
  EXPECT_NEAR(optimum.bpc(), DenseLaw(2e15), 1e-9);
  EXPECT_DOUBLE_EQ(optimum.best_grid_activation_rate(), 0.2);
  EXPECT_EQ(optimum.points(), 3u);
}

TEST_F(SchedulerTest, AnalyzeSweepWithOneFinishedDenseRunIsFailedPrecondition) {
  const v1::SubmitSweepResponse submitted = Submit(AnalysisSweepSpec("too-early"));
  FinishRuns(1);  // grid order: only dense-1C finishes
  v1::AnalyzeSweepRequest request;
  request.set_sweep_id(submitted.sweep().sweep_id());
  const absl::Status status = scheduler_->AnalyzeSweep(request).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition) << status;
  std::optional<google::rpc::PreconditionFailure> failure = PreconditionOf(status);
  ASSERT_TRUE(failure.has_value()) << "expected a PreconditionFailure detail: " << status;
  ASSERT_EQ(failure->violations_size(), 1);
  EXPECT_EQ(failure->violations(0).type(), "DENSE_BASELINES");
  EXPECT_EQ(failure->violations(0).subject(), "sweeps/" + submitted.sweep().sweep_id());
  EXPECT_THAT(failure->violations(0).description(), ::testing::HasSubstr("has 1"));
}

TEST_F(SchedulerTest, AnalyzeSweepUnknownIsNotFoundWithResourceInfo) {
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
