// What `parity plan` tells a researcher about a sweep before it runs: its estimated wall time on
// the workers assumed, and grid points that collapse into the identical run.
#include "core/sweep_estimate.h"

#include <tuple>

#include "core/planner.h"
#include "core/planner_warnings.h"
#include "core/spec_loader.h"
#include "gtest/gtest.h"

namespace parity::core {
namespace {

using parity::v1::RunSpec;

RunSpec RunOf(double flops) {
  RunSpec run;
  run.mutable_accounting()->set_compute_flops(flops);
  return run;
}

TEST(SweepEstimateTest, LongestRunsFirstOntoTheWorkerThatFreesFirst) {
  const std::vector<RunSpec> runs = {RunOf(4e9), RunOf(2e9), RunOf(2e9), RunOf(4e9)};
  EXPECT_DOUBLE_EQ(TotalComputeFlops(runs), 12e9);
  EXPECT_DOUBLE_EQ(EstimateWallSeconds(runs, 1, 1e9, 0), 12) << "one worker: the sum";
  EXPECT_DOUBLE_EQ(EstimateWallSeconds(runs, 2, 1e9, 0), 6) << "4+2 on each of two workers";
  EXPECT_DOUBLE_EQ(EstimateWallSeconds(runs, 10, 1e9, 0), 4) << "never below the longest run";
  EXPECT_DOUBLE_EQ(EstimateWallSeconds(runs, 2, 1e9, 1), 8) << "each run pays its overhead";
  EXPECT_DOUBLE_EQ(EstimateWallSeconds({}, 4, 1e9), 0);
}

// The defaults reproduce the two sweeps measured on this project's CPU machine.
TEST(SweepEstimateTest, DefaultsMatchTheMeasuredCpuSweeps) {
  for (const auto& [path, workers, measured_minutes] :
       {std::tuple{"examples/micro.yaml", 1, 2.0},
        std::tuple{"examples/cpu_study.yaml", 2, 72.0}}) {
    absl::StatusOr<parity::v1::SweepSpec> spec = LoadSweepSpecFile(path);
    ASSERT_TRUE(spec.ok()) << path;
    absl::StatusOr<std::vector<RunSpec>> runs = PlanSweep(*spec);
    ASSERT_TRUE(runs.ok()) << path;
    const double minutes = EstimateWallSeconds(*runs, workers, DefaultWorkerFlops(*runs)) / 60;
    EXPECT_NEAR(minutes, measured_minutes, 0.25 * measured_minutes)
        << path << " on " << workers << " worker(s): estimated " << minutes << " min, measured ≈ "
        << measured_minutes << " min";
  }
}

TEST(SweepEstimateTest, FormatsDurationsRatesAndTheLine) {
  EXPECT_EQ(FormatDuration(45), "~45 s");
  EXPECT_EQ(FormatDuration(12 * 60), "~12 min");
  EXPECT_EQ(FormatDuration(3 * 3600 + 10 * 60), "~3 h 10 min");
  EXPECT_EQ(FormatDuration(5 * 86400), "~5.0 days");
  EXPECT_EQ(FormatFlopRate(2e9), "2.0 GFLOP/s");
  EXPECT_EQ(FormatFlopRate(4e14), "400 TFLOP/s");
  // 4 workers at 2 GFLOP/s, 16 runs of 2.85e12 FLOPs: 4 runs each, 5700 s = 1 h 35 min.
  std::vector<RunSpec> runs(16, RunOf(2.85e12));
  EXPECT_EQ(WallTimeLine(runs, 4, 2e9),
            "estimated wall time: ~1 h 35 min for Σ C = 4.6e+13 FLOPs on 4 workers at 2.0 "
            "GFLOP/s each (assumed; --workers, --worker-flops)");
}

TEST(SweepEstimateTest, DefaultRateFollowsWhatTheRunsAskFor) {
  std::vector<RunSpec> runs = {RunOf(1), RunOf(1)};
  EXPECT_DOUBLE_EQ(DefaultWorkerFlops(runs), kCpuThreadFlopsPerSecond) << "0 threads = 1";
  runs[1].mutable_resources()->set_cpu_threads(4);
  EXPECT_DOUBLE_EQ(DefaultWorkerFlops(runs), 4 * kCpuThreadFlopsPerSecond);
  runs[0].mutable_resources()->set_gpus(8);
  EXPECT_DOUBLE_EQ(DefaultWorkerFlops(runs), 8 * kGpuFlopsPerSecond);
}

constexpr char kRedundantSpec[] = R"(
name: redundant
allow_undertrained: true
moe:
  d_model: 64
  num_layers: 2
  num_heads: 4
  moe: {layout: all-moe, total_ffn_ratio: 16, granularity: 4}
dense: {d_model: 128, num_layers: 2, num_heads: 8, ffn_hidden: 384}
training: {learning_rate: 3e-3, batch_tokens: 64, sequence_length: 64}
data: {corpus: kjv}
grid:
  moe:
    - {name: a, target_activation_rate: 0.25}
    - {name: b, target_activation_rate: 0.25}
    - {name: c, target_activation_rate: 0.4}
  compute: [{name: C1, compute_flops: 2e10}, {name: C2, compute_flops: 4e10}]
  data: [{name: unique, reuse: unique}, {name: strict, reuse: strict}]
  seeds: [0, 1]
baselines:
  - {name: dense-1C, compute_multiple: 1}
  - {name: dense-2C, compute_multiple: 2}
)";

TEST(PlanWarningsTest, GridPointsPlanningTheIdenticalModelWarnOnceNamingBoth) {
  absl::StatusOr<parity::v1::SweepSpec> spec = ParseSweepSpec(kRedundantSpec, SpecFormat::kYaml);
  ASSERT_TRUE(spec.ok()) << spec.status();
  absl::StatusOr<std::vector<RunSpec>> runs = PlanSweep(*spec);
  ASSERT_TRUE(runs.ok()) << runs.status();
  std::vector<FieldViolation> redundant;
  for (const FieldViolation& w : PlanWarnings(*spec, *runs)) {
    if (w.description.find("plan the identical model") != std::string::npos) redundant.push_back(w);
  }
  ASSERT_EQ(redundant.size(), 1u)
      << "points a and b are the same shape; the merges the design expects (dense 2C of C1 = "
         "dense 1C of C2, dense 1C strict = unique) are not redundant points";
  EXPECT_EQ(redundant[0].field, "grid.moe");
  EXPECT_NE(redundant[0].description.find("grid points moe=a and moe=b plan the identical model"),
            std::string::npos)
      << redundant[0].description;
  EXPECT_NE(redundant[0].description.find("(8 runs planned once, e.g. 'moe-a-C1-unique-s0' at C1)"),
            std::string::npos)
      << "2 budgets × 2 data × 2 seeds: " << redundant[0].description;
  EXPECT_NE(redundant[0].description.find("remove it or change it"), std::string::npos);

  // Distinct points: no such warning.
  spec->mutable_grid()->mutable_moe(1)->set_target_activation_rate(0.6);
  runs = PlanSweep(*spec);
  ASSERT_TRUE(runs.ok()) << runs.status();
  for (const FieldViolation& w : PlanWarnings(*spec, *runs)) {
    EXPECT_EQ(w.description.find("plan the identical model"), std::string::npos) << w.description;
  }
}

TEST(PlanWarningsTest, NoExampleHasARedundantGridPoint) {
  for (const char* path :
       {"examples/full_study_2b.yaml", "examples/published_2b.yaml", "examples/micro.yaml",
        "examples/cpu_study.yaml", "examples/equal_resources_7b.yaml"}) {
    absl::StatusOr<parity::v1::SweepSpec> spec = LoadSweepSpecFile(path);
    ASSERT_TRUE(spec.ok()) << path;
    absl::StatusOr<std::vector<RunSpec>> runs = PlanSweep(*spec);
    ASSERT_TRUE(runs.ok()) << path;
    for (const FieldViolation& w : PlanWarnings(*spec, *runs)) {
      EXPECT_EQ(w.description.find("plan the identical model"), std::string::npos)
          << path << ": " << w.field << ": " << w.description;
    }
  }
}

}  // namespace
}  // namespace parity::core
