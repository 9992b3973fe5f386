// Fits on synthetic data with known answers: the dense law (with and without an outlier), the
// measured EL, and the optimal activation rate with its standard error.
#include "core/analysis.h"

#include <cmath>
#include <vector>

#include "gtest/gtest.h"
#include "parity/v1/sweep.pb.h"

namespace parity::core {
namespace {

constexpr double kA = 900.0, kB = 0.12, kC = 0.7;

std::vector<Observation> DenseRuns() {
  std::vector<Observation> runs;
  for (double c = 1e18; c <= 1.1e22; c *= 3) runs.push_back({c, kA * std::pow(c, -kB) + kC});
  return runs;
}

TEST(AnalysisTest, RecoversTheDenseLaw) {
  absl::StatusOr<DenseLawFit> fit = FitDenseComputeLaw(DenseRuns());
  ASSERT_TRUE(fit.ok()) << fit.status();
  EXPECT_NEAR(fit->b, kB, 0.002) << "exponent b";
  EXPECT_NEAR(fit->c, kC, 0.01) << "floor c";
  EXPECT_NEAR(fit->a / kA, 1.0, 0.05) << "scale a";
  EXPECT_LT(fit->rms_residual, 1e-3);
  EXPECT_EQ(fit->points, 9);
}

TEST(AnalysisTest, HuberFitShrugsOffOneDivergedRun) {
  std::vector<Observation> runs = DenseRuns();
  runs[4].y += 0.8;  // one run diverged
  absl::StatusOr<DenseLawFit> fit = FitDenseComputeLaw(runs);
  ASSERT_TRUE(fit.ok()) << fit.status();
  for (double c : {1e19, 1e20, 1e21}) {
    EXPECT_NEAR(DenseLoss(*fit, c), kA * std::pow(c, -kB) + kC, 0.03)
        << "the robust fit should follow the clean runs at C = " << c;
  }
}

TEST(AnalysisTest, MeasuredLeverage) {
  const DenseLawFit fit{.a = kA, .b = kB, .c = kC, .points = 5};
  // An MoE that reaches the dense loss of C = 4e20 while spending 1e20 has EL = 4.
  const double loss = DenseLoss(fit, 4e20);
  absl::StatusOr<double> el = MeasuredEfficiencyLeverage(fit, loss, 1e20);
  ASSERT_TRUE(el.ok()) << el.status();
  EXPECT_NEAR(*el, 4.0, 1e-6);
  EXPECT_EQ(MeasuredEfficiencyLeverage(fit, kC - 0.1, 1e20).status().code(),
            absl::StatusCode::kOutOfRange)
      << "a loss below the dense floor has no dense-equivalent compute";
}

TEST(AnalysisTest, TwoBudgetsFitAPurePowerLaw) {
  const std::vector<Observation> runs = {{1e20, 2.0 * std::pow(1e20 / 1e19, -0.1)},
                                         {2e20, 2.0 * std::pow(2e20 / 1e19, -0.1)}};
  absl::StatusOr<DenseLawFit> fit = FitDenseComputeLaw(runs);
  ASSERT_TRUE(fit.ok()) << fit.status();
  EXPECT_EQ(fit->c, 0.0) << "two budgets cannot identify c; it is fixed at 0";
  EXPECT_NEAR(fit->b, 0.1, 1e-9);
  EXPECT_NEAR(DenseLoss(*fit, 1.5e20), 2.0 * std::pow(15.0, -0.1), 1e-9);
}

TEST(AnalysisTest, OneDenseBudgetIsNotEnough) {
  const std::vector<Observation> runs = {{1e19, 2.0}, {1e19, 2.01}};
  EXPECT_EQ(FitDenseComputeLaw(runs).status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST(AnalysisTest, AnalyzesASweepsFinishedRuns) {
  // Dense baselines at three budgets on the law; four MoE runs of one group.
  std::vector<parity::v1::RunSpec> specs;
  std::vector<FinishedRun> runs;
  auto add = [&](parity::v1::RunRole role, double compute, double ra, double bpc) {
    parity::v1::RunSpec spec;
    spec.set_name("run" + std::to_string(specs.size()));
    spec.set_role(role);
    spec.set_compute_budget("C1");
    spec.set_data_variant("unique");
    spec.mutable_accounting()->set_compute_flops(compute);
    spec.mutable_accounting()->set_activation_rate(ra);
    specs.push_back(spec);
    runs.push_back({"id" + std::to_string(runs.size()), nullptr, bpc});
  };
  for (double c : {1e19, 1e20, 1e21}) {
    add(parity::v1::RUN_ROLE_DENSE_BASELINE, c, 1.0, kA * std::pow(c, -kB) + kC);
  }
  for (double ra : {0.1, 0.2, 0.3, 0.5}) {
    const double t = std::log(ra / 0.25);
    add(parity::v1::RUN_ROLE_MOE, 1e20, ra, kA * std::pow(4e20, -kB) + kC + 0.02 * t * t);
  }
  for (size_t i = 0; i < runs.size(); ++i) runs[i].spec = &specs[i];  // specs no longer grows
  const SweepAnalysis analysis = AnalyzeFinishedRuns(runs);
  ASSERT_TRUE(analysis.dense_fit.ok()) << analysis.dense_fit.status();
  ASSERT_EQ(analysis.leverage.size(), 4u);
  ASSERT_TRUE(analysis.leverage[2].efficiency_leverage.has_value());
  EXPECT_NEAR(*analysis.leverage[2].efficiency_leverage, 3.9, 0.4)
      << "an MoE at r_a ≈ 0.25 reaching the dense loss of 4e20 with 1e20 has EL ≈ 4";
  ASSERT_EQ(analysis.optimal_activation.size(), 1u);
  ASSERT_TRUE(analysis.optimal_activation[0].fit.ok());
  EXPECT_NEAR(analysis.optimal_activation[0].fit->activation_rate, 0.25, 0.01);
}

TEST(AnalysisTest, OptimalActivationRateWithStandardError) {
  std::vector<Observation> runs;
  const double noise[] = {0.002, -0.003, 0.001, 0.003, -0.002, 0.001};
  int i = 0;
  for (double r : {0.05, 0.1, 0.15, 0.2, 0.3, 0.5}) {
    const double t = std::log(r / 0.18);
    runs.push_back({r, 1.2 + 0.05 * t * t + noise[i++]});
  }
  absl::StatusOr<OptimalActivationFit> fit = FitOptimalActivation(runs);
  ASSERT_TRUE(fit.ok()) << fit.status();
  EXPECT_NEAR(fit->activation_rate, 0.18, 0.02) << "fitted optimum";
  EXPECT_GT(fit->activation_rate_stderr, 0.0) << "noise must show up as uncertainty";
  EXPECT_LT(fit->activation_rate_stderr, 0.05);
  EXPECT_NEAR(fit->bpc, 1.2, 0.005);
  EXPECT_EQ(fit->points, 6);
  // Observed: r_a 0.15 → 1.2017 + 0.001, r_a 0.2 → 1.2006 + 0.003; 0.15 has the lowest BPC.
  EXPECT_DOUBLE_EQ(fit->best_grid_activation_rate, 0.15) << "the lowest observed BPC";
}

TEST(AnalysisTest, OptimalActivationNeedsAConvexFit) {
  const std::vector<Observation> concave = {{0.1, 1.0}, {0.2, 1.3}, {0.4, 1.0}};
  EXPECT_EQ(FitOptimalActivation(concave).status().code(), absl::StatusCode::kFailedPrecondition);
  const std::vector<Observation> two = {{0.1, 1.0}, {0.2, 1.3}};
  EXPECT_EQ(FitOptimalActivation(two).status().code(), absl::StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace parity::core
