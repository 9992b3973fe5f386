// Fits on synthetic data with known answers: the dense law (noisy, with an outlier, at its
// bounds, refused on two budgets), measured EL and its interval, the optimal activation rate
// (bracketed, not bracketed, never outside the grid over many random sweeps), the joint EL law.
#include "core/analysis.h"

#include <cmath>
#include <deque>
#include <vector>

#include "core/analysis_stats.h"
#include "core/tests/test_noise.h"
#include "gtest/gtest.h"

namespace parity::core {
namespace {

constexpr double kA = 900.0, kB = 0.12, kC = 0.7;

using testing::Noise;

std::vector<Observation> DenseRuns(double noise = 0, int seeds = 1) {
  Noise n(7);
  std::vector<Observation> runs;
  for (double c = 1e18; c <= 1.1e22; c *= 3) {
    for (int s = 0; s < seeds; ++s)
      runs.push_back({c, kA * std::pow(c, -kB) + kC + n.Normal(noise)});
  }
  return runs;
}

void ExpectInside(const std::optional<Interval>& interval, double value, const char* what) {
  ASSERT_TRUE(interval.has_value()) << what << ": expected an interval";
  EXPECT_LE(interval->low, value) << what << " should be inside [" << interval->low << ", "
                                  << interval->high << "]";
  EXPECT_GE(interval->high, value)
      << what << " should be inside [" << interval->low << ", " << interval->high << "]";
}

TEST(DenseLawTest, RecoversAKnownLawInsideItsIntervals) {
  const std::vector<Observation> runs = DenseRuns(0.004, 2);
  absl::StatusOr<DenseLawFit> fit = FitDenseComputeLaw(runs);
  ASSERT_TRUE(fit.ok()) << fit.status();
  EXPECT_EQ(fit->points, 18);
  EXPECT_EQ(fit->budgets, 9);
  EXPECT_GT(fit->resamples, 900) << "nearly every bootstrap refit should succeed";
  ExpectInside(fit->b_interval, kB, "b");
  ExpectInside(fit->c_interval, kC, "c");
  ExpectInside(fit->a_interval, kA, "a");
  EXPECT_NEAR(fit->b, kB, 0.01);
  EXPECT_NEAR(fit->c, kC, 0.05);
  EXPECT_LT(fit->b_interval->high - fit->b_interval->low, 0.05) << "a usefully narrow interval";
  EXPECT_LT(fit->rms_residual, 0.01);
}

TEST(DenseLawTest, ExactDataGivesTheLawItself) {
  absl::StatusOr<DenseLawFit> fit = FitDenseComputeLaw(DenseRuns());
  ASSERT_TRUE(fit.ok()) << fit.status();
  EXPECT_NEAR(fit->b, kB, 0.002);
  EXPECT_NEAR(fit->c, kC, 0.01);
  EXPECT_NEAR(fit->a / kA, 1.0, 0.05);
}

TEST(DenseLawTest, HuberFitShrugsOffOneDivergedRun) {
  std::vector<Observation> runs = DenseRuns();
  runs[4].y += 0.8;  // one run diverged
  absl::StatusOr<DenseLawFit> fit = FitDenseComputeLaw(runs);
  ASSERT_TRUE(fit.ok()) << fit.status();
  for (double c : {1e19, 1e20, 1e21}) {
    EXPECT_NEAR(DenseLoss(*fit, c), kA * std::pow(c, -kB) + kC, 0.03)
        << "the robust fit should follow the clean runs at C = " << c;
  }
}

TEST(DenseLawTest, FloorStaysInsideZeroToTheLowestLoss) {
  // A pure power law (true c = 0) with noise pulls an unconstrained c below 0; a curve that
  // flattens abruptly pulls it up to the lowest loss. Many random laws in between.
  Noise noise(11);
  for (int trial = 0; trial < 200; ++trial) {
    const double a = 5 + 50 * noise.Uniform(), b = 0.02 + 0.3 * noise.Uniform();
    const double c = trial % 3 == 0 ? 0.0 : 2 * noise.Uniform();
    std::vector<Observation> runs;
    double min_loss = 1e300;
    for (double compute : {1e15, 3e15, 1e16, 3e16}) {
      const double y = a * std::pow(compute, -b) * 1e-2 + c + noise.Normal(0.02);
      if (y <= 0) continue;
      runs.push_back({compute, y});
      min_loss = std::min(min_loss, y);
    }
    if (trial % 5 == 0) runs.push_back({1e17, min_loss});  // abrupt flattening
    absl::StatusOr<DenseLawFit> fit = FitDenseComputeLaw(runs, {.bootstrap = {.resamples = 50}});
    if (!fit.ok()) {
      EXPECT_EQ(fit.status().code(), absl::StatusCode::kFailedPrecondition) << fit.status();
      continue;
    }
    EXPECT_GE(fit->c, 0.0) << "trial " << trial;
    EXPECT_LT(fit->c, min_loss) << "trial " << trial << ": c must stay below the lowest loss";
    for (const auto& [ra, rb, rc] : fit->replicates) EXPECT_GE(rc, 0.0) << "trial " << trial;
  }
}

TEST(DenseLawTest, RefusesWithFewerThanThreeBudgets) {
  const std::vector<Observation> two = {{1e20, 2.0}, {1e20, 2.01}, {2e20, 1.9}, {2e20, 1.91}};
  const absl::Status status = FitDenseComputeLaw(two).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition) << status;
  EXPECT_NE(status.message().find("≥ 3 distinct compute budgets"), std::string::npos) << status;
  EXPECT_NE(status.message().find("span 2 budgets"), std::string::npos) << status;
  // Token rounding makes one budget's C differ in the sixth digit: still one budget.
  const std::vector<Observation> rounded = {{1e20, 2.0}, {1e20 * (1 + 1e-6), 2.01}, {2e20, 1.9}};
  EXPECT_EQ(FitDenseComputeLaw(rounded).status().code(), absl::StatusCode::kFailedPrecondition);
  const std::vector<Observation> bad = {{1e20, 2.0}, {2e20, -1}, {4e20, 1.5}};
  EXPECT_EQ(FitDenseComputeLaw(bad).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(DenseLawTest, ThreeRunsFitWithoutAnInterval) {
  const std::vector<Observation> runs = {{1e18, kA * std::pow(1e18, -kB) + kC},
                                         {1e20, kA * std::pow(1e20, -kB) + kC},
                                         {1e22, kA * std::pow(1e22, -kB) + kC}};
  absl::StatusOr<DenseLawFit> fit = FitDenseComputeLaw(runs);
  ASSERT_TRUE(fit.ok()) << fit.status();
  EXPECT_FALSE(fit->b_interval.has_value());
  EXPECT_NE(fit->interval_note.find("no residual"), std::string::npos) << fit->interval_note;
}

TEST(LeverageTest, MeasuredLeverageAndItsInterval) {
  DenseLawFit fit;
  fit.a = kA;
  fit.b = kB;
  fit.c = kC;
  // An MoE that reaches the dense loss of C = 4e20 while spending 1e20 has EL = 4.
  const double loss = DenseLoss(fit, 4e20);
  absl::StatusOr<double> el = MeasuredEfficiencyLeverage(fit, loss, 1e20);
  ASSERT_TRUE(el.ok()) << el.status();
  EXPECT_NEAR(*el, 4.0, 1e-6);
  EXPECT_EQ(MeasuredEfficiencyLeverage(fit, kC - 0.1, 1e20).status().code(),
            absl::StatusCode::kOutOfRange)
      << "a loss below the dense floor has no dense-equivalent compute";
  EXPECT_FALSE(EfficiencyLeverageInterval(fit, loss, 1e20).has_value()) << "no replicates";

  absl::StatusOr<DenseLawFit> noisy = FitDenseComputeLaw(DenseRuns(0.004, 2));
  ASSERT_TRUE(noisy.ok()) << noisy.status();
  const double moe_loss = kA * std::pow(4e20, -kB) + kC;
  absl::StatusOr<double> measured = MeasuredEfficiencyLeverage(*noisy, moe_loss, 1e20);
  ASSERT_TRUE(measured.ok()) << measured.status();
  const std::optional<Interval> interval = EfficiencyLeverageInterval(*noisy, moe_loss, 1e20);
  ExpectInside(interval, *measured, "the measured EL");
  ExpectInside(interval, 4.0, "the true EL");
}

std::vector<Observation> ParabolaSweep(const std::vector<double>& rates, double optimum,
                                       double curvature, double noise, int seeds,
                                       uint64_t noise_seed) {
  Noise n(noise_seed);
  std::vector<Observation> runs;
  for (double r : rates) {
    const double t = std::log(r / optimum);
    for (int s = 0; s < seeds; ++s) runs.push_back({r, 1.2 + curvature * t * t + n.Normal(noise)});
  }
  return runs;
}

TEST(OptimumTest, ParabolaGivesAPointOptimumInsideItsBracket) {
  const std::vector<double> grid = {0.05, 0.1, 0.15, 0.2, 0.3, 0.45, 0.6};
  const std::vector<Observation> runs = ParabolaSweep(grid, 0.2, 0.05, 0.004, 3, 3);
  absl::StatusOr<OptimalActivationFit> fit = FitOptimalActivation(runs);
  ASSERT_TRUE(fit.ok()) << fit.status();
  ASSERT_EQ(fit->status, OptimumStatus::kBracketed) << fit->reason;
  EXPECT_TRUE(fit->reason.empty());
  EXPECT_TRUE(fit->lack_of_fit.tested) << fit->lack_of_fit.note;
  EXPECT_GE(fit->lack_of_fit.p_value, kTestLevel) << "a true parabola passes the fit test";
  EXPECT_NEAR(fit->activation_rate, 0.2, 0.03);
  ExpectInside(fit->activation_rate_interval, 0.2, "the true optimum r_a = 0.2");
  EXPECT_EQ(fit->points, 21);
  EXPECT_EQ(fit->rates, 7);
  EXPECT_DOUBLE_EQ(fit->best_grid_activation_rate, 0.2);
}

TEST(OptimumTest, RegionAndBestPointProbabilities) {
  // 15% and 20% differ by 0.005 with seeds spread ±0.01: indistinguishable; 5% and 60% far above.
  const std::vector<Observation> runs = {{0.05, 1.30},  {0.05, 1.31},  {0.05, 1.32}, {0.15, 1.205},
                                         {0.15, 1.215}, {0.15, 1.225}, {0.2, 1.20},  {0.2, 1.21},
                                         {0.2, 1.22},   {0.6, 1.40},   {0.6, 1.41},  {0.6, 1.42}};
  absl::StatusOr<OptimalActivationFit> fit = FitOptimalActivation(runs);
  ASSERT_TRUE(fit.ok()) << fit.status();
  ASSERT_EQ(fit->grid.size(), 4u);
  EXPECT_EQ(fit->grid[2].region, RegionMembership::kBest);
  EXPECT_EQ(fit->grid[1].region, RegionMembership::kInside) << "0.005 apart is not a difference";
  EXPECT_GT(*fit->grid[1].p_value_above_best, 0.10);
  EXPECT_EQ(fit->grid[0].region, RegionMembership::kOutside);
  EXPECT_EQ(fit->grid[3].region, RegionMembership::kOutside);
  ASSERT_TRUE(fit->region.has_value()) << fit->region_note;
  EXPECT_DOUBLE_EQ(fit->region->low, 0.15);
  EXPECT_DOUBLE_EQ(fit->region->high, 0.2);
  EXPECT_TRUE(fit->region_contiguous);
  EXPECT_GT(fit->grid[2].probability_best, 0.55) << "the best wins most resamples";
  EXPECT_GT(fit->grid[1].probability_best, 0.15) << "its twin wins a good share of them";
  EXPECT_LT(fit->grid[1].probability_best, fit->grid[2].probability_best);
  EXPECT_EQ(fit->grid[0].probability_best, 0.0);
  EXPECT_NEAR(fit->grid[1].probability_best + fit->grid[2].probability_best, 1.0, 1e-12);
  EXPECT_EQ(fit->probability_resamples, 2000);
}

TEST(OptimumTest, RejectedFitGivesNoPointOptimum) {
  // The CPU study's shape at C2 with tight seeds: steep on the left, straight on the right. A
  // quadratic over the window misfits it far beyond the seed noise.
  const std::vector<double> grid = {0.05, 0.1, 0.15, 0.2, 0.3, 0.45, 0.6};
  std::vector<Observation> runs;
  Noise n(4);
  for (double r : grid) {
    const double s = std::log(r / 0.2);
    for (int seed = 0; seed < 3; ++seed) {
      runs.push_back({r, 1.75 + 0.25 * (std::exp(-3 * s) + 3 * s - 1) + n.Normal(0.002)});
    }
  }
  absl::StatusOr<OptimalActivationFit> fit = FitOptimalActivation(runs);
  ASSERT_TRUE(fit.ok()) << fit.status();
  EXPECT_EQ(fit->status, OptimumStatus::kPoorFit) << fit->reason;
  EXPECT_TRUE(fit->lack_of_fit.tested);
  EXPECT_LT(fit->lack_of_fit.p_value, kTestLevel);
  EXPECT_NE(fit->reason.find("lack-of-fit test rejects"), std::string::npos) << fit->reason;
  EXPECT_EQ(fit->activation_rate, 0.0) << "no point optimum is printed";
  EXPECT_FALSE(fit->activation_rate_interval.has_value());
  EXPECT_DOUBLE_EQ(fit->best_grid_activation_rate, 0.2) << "the best grid point still is";
  EXPECT_TRUE(fit->region.has_value()) << "and so is the region";
}

TEST(OptimumTest, MonotoneSweepIsNotBracketed) {
  // The demo's shape: BPC falls all the way to the largest r_a of a 15–60% grid.
  const std::vector<Observation> runs =
      ParabolaSweep({0.15, 0.25, 0.4, 0.6}, 0.9, 0.05, 0.001, 2, 5);
  absl::StatusOr<OptimalActivationFit> fit = FitOptimalActivation(runs);
  ASSERT_TRUE(fit.ok()) << fit.status();
  EXPECT_EQ(fit->status, OptimumStatus::kNotBracketed);
  EXPECT_EQ(fit->reason, "not bracketed: lowest at the edge r_a = 60%");
  EXPECT_FALSE(fit->activation_rate_interval.has_value());
  EXPECT_EQ(fit->activation_rate, 0.0) << "no optimum is reported";
  EXPECT_DOUBLE_EQ(fit->best_grid_activation_rate, 0.6);
}

TEST(OptimumTest, EndsWithinNoiseAreNotEvidence) {
  // The interior mean is lowest, but the 5% end is only 0.003 above it with ±0.01 seeds.
  const std::vector<Observation> runs = {{0.05, 1.203}, {0.05, 1.223}, {0.1, 1.20},
                                         {0.1, 1.22},   {0.3, 1.40},   {0.3, 1.41}};
  absl::StatusOr<OptimalActivationFit> fit = FitOptimalActivation(runs);
  ASSERT_TRUE(fit.ok()) << fit.status();
  EXPECT_EQ(fit->status, OptimumStatus::kNotBracketed);
  EXPECT_NE(fit->reason.find("not bracketed with evidence"), std::string::npos) << fit->reason;
}

TEST(OptimumTest, TooFewRatesAndOneSeed) {
  absl::StatusOr<OptimalActivationFit> two =
      FitOptimalActivation(std::vector<Observation>{{0.1, 1.0}, {0.2, 0.9}, {0.2, 0.91}});
  ASSERT_TRUE(two.ok());
  EXPECT_EQ(two->status, OptimumStatus::kTooFewRates);
  EXPECT_NE(two->reason.find("has 2"), std::string::npos) << two->reason;

  absl::StatusOr<OptimalActivationFit> single =
      FitOptimalActivation(ParabolaSweep({0.1, 0.2, 0.4}, 0.2, 0.05, 0, 1, 1));
  ASSERT_TRUE(single.ok());
  EXPECT_EQ(single->status, OptimumStatus::kNotBracketed) << "one seed: no evidence, no test";
  EXPECT_FALSE(single->region.has_value());
  EXPECT_NE(single->region_note.find("one seed"), std::string::npos) << single->region_note;
  EXPECT_DOUBLE_EQ(single->grid[1].probability_best, 1.0);
  EXPECT_EQ(single->probability_resamples, 0);

  EXPECT_EQ(FitOptimalActivation(std::vector<Observation>{{1.5, 1.0}}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(OptimumTest, NothingReportedEverLiesOutsideTheGrid) {
  Noise n(99);
  int bracketed = 0, not_bracketed = 0;
  for (int trial = 0; trial < 300; ++trial) {
    std::vector<double> grid;
    double r = 0.02 + 0.1 * n.Uniform();
    const int rates = 3 + static_cast<int>(n.Uniform() * 5);
    for (int i = 0; i < rates && r <= 1; ++i, r *= 1.3 + n.Uniform()) grid.push_back(r);
    if (grid.size() < 3) continue;
    const double optimum =
        std::exp(std::log(grid.front()) - 1 +
                 (std::log(grid.back()) - std::log(grid.front()) + 2) * n.Uniform());
    const std::vector<Observation> runs =
        ParabolaSweep(grid, optimum, 0.01 + 0.1 * n.Uniform(), 0.02 * n.Uniform(),
                      1 + static_cast<int>(n.Uniform() * 3), trial);
    absl::StatusOr<OptimalActivationFit> fit = FitOptimalActivation(runs, {.resamples = 100});
    ASSERT_TRUE(fit.ok()) << fit.status();
    const double lo = grid.front(), hi = grid.back();
    if (fit->status != OptimumStatus::kBracketed) {
      ++not_bracketed;
      EXPECT_FALSE(fit->reason.empty());
      EXPECT_FALSE(fit->activation_rate_interval.has_value());
      continue;
    }
    ++bracketed;
    EXPECT_GE(fit->activation_rate, lo) << "trial " << trial;
    EXPECT_LE(fit->activation_rate, hi) << "trial " << trial;
    ASSERT_TRUE(fit->activation_rate_interval.has_value());
    EXPECT_GE(fit->activation_rate_interval->low, lo) << "trial " << trial;
    EXPECT_LE(fit->activation_rate_interval->high, hi) << "trial " << trial;
    EXPECT_LE(fit->activation_rate_interval->low, fit->activation_rate) << "trial " << trial;
    EXPECT_GE(fit->activation_rate_interval->high, fit->activation_rate) << "trial " << trial;
  }
  EXPECT_GT(bracketed, 20) << "the random sweeps should exercise bracketed groups";
  EXPECT_GT(not_bracketed, 50) << "and groups that are not bracketed";
}

// A sweep of specs the analysis reads; `add` returns the spec for further edits.
class SweepBuilder {
 public:
  parity::v1::RunSpec& Add(const std::string& name, parity::v1::RunRole role, double compute,
                           double ra, double bpc, const std::string& variant = "unique") {
    parity::v1::RunSpec spec;
    spec.set_name(name);
    spec.set_role(role);
    spec.set_compute_budget("C1");
    spec.set_data_variant(variant);
    spec.set_compute_multiple(compute / 1e20);
    spec.mutable_accounting()->set_compute_flops(compute);
    spec.mutable_accounting()->set_activation_rate(ra);
    spec.mutable_accounting()->set_params(1000000);
    specs_.push_back(std::move(spec));
    bpc_.push_back(bpc);
    memberships_.emplace_back();
    return specs_.back();
  }
  // The last added run also serves this group (a run shared between groups).
  void AlsoServes(const std::string& budget, double multiple) {
    if (memberships_.back().empty()) {
      const parity::v1::RunSpec& spec = specs_.back();
      memberships_.back().push_back({spec.compute_budget(),
                                     spec.data_variant(),
                                     spec.compute_multiple(),
                                     {},
                                     "",
                                     parity::v1::RUN_ROLE_UNSPECIFIED});
    }
    memberships_.back().push_back(
        {budget, specs_.back().data_variant(), multiple, {}, "", parity::v1::RUN_ROLE_UNSPECIFIED});
  }
  SweepAnalysis Analyze() {
    std::vector<FinishedRun> runs;
    for (size_t i = 0; i < specs_.size(); ++i) {
      runs.push_back({"id" + std::to_string(i), &specs_[i], bpc_[i], memberships_[i]});
    }
    return AnalyzeFinishedRuns(runs);
  }

 private:
  std::deque<parity::v1::RunSpec> specs_;  // stable addresses
  std::vector<double> bpc_;
  std::vector<std::vector<GroupMembership>> memberships_;
};

TEST(SweepAnalysisTest, LeverageOptimumAndGridPoints) {
  SweepBuilder sweep;
  Noise n(5);
  for (double c : {1e20, 2e20, 4e20, 8e20}) {
    for (int s = 0; s < 2; ++s) {
      sweep.Add("dense-" + std::to_string(int(c / 1e20)) + "C-s" + std::to_string(s),
                parity::v1::RUN_ROLE_DENSE_BASELINE, c, 1.0,
                kA * std::pow(c, -kB) + kC + n.Normal(0.002));
    }
  }
  for (double ra : {0.1, 0.2, 0.3, 0.5}) {
    const double t = std::log(ra / 0.25);
    for (int s = 0; s < 2; ++s) {
      sweep.Add("moe-ra" + std::to_string(int(ra * 100)) + "-s" + std::to_string(s),
                parity::v1::RUN_ROLE_MOE, 1e20, ra,
                kA * std::pow(4e20, -kB) + kC + 0.02 * t * t + n.Normal(0.002));
    }
  }
  const SweepAnalysis analysis = sweep.Analyze();
  ASSERT_TRUE(analysis.dense_fit.ok()) << analysis.dense_fit.status();
  ASSERT_EQ(analysis.leverage.size(), 8u);
  const RunLeverageResult& best = analysis.leverage[3];  // r_a 0.2, seed 1
  ASSERT_TRUE(best.efficiency_leverage.has_value()) << best.missing_reason;
  EXPECT_NEAR(*best.efficiency_leverage, 3.9, 0.6) << "≈ the dense loss of 4e20 with 1e20";
  ExpectInside(best.efficiency_leverage_interval, *best.efficiency_leverage, "EL");
  ASSERT_EQ(analysis.optimal_activation.size(), 1u);
  ASSERT_TRUE(analysis.optimal_activation[0].fit.ok());
  const OptimalActivationFit& optimum = *analysis.optimal_activation[0].fit;
  EXPECT_TRUE(optimum.best_grid_activation_rate == 0.2 || optimum.best_grid_activation_rate == 0.3)
      << "the true optimum 0.25 lies between 0.2 and 0.3; got "
      << optimum.best_grid_activation_rate;
  EXPECT_EQ(analysis.optimal_activation[0].group, "C1/unique");
  EXPECT_FALSE(analysis.el_law.ok()) << "one budget and no granularities: no joint law";

  ASSERT_EQ(analysis.grid_points.size(), 8u) << "4 dense budgets and 4 MoE points";
  EXPECT_EQ(analysis.grid_points[0].name, "dense-1C");
  EXPECT_EQ(analysis.grid_points[0].verdict, DeltaVerdict::kIsBaseline);
  const GridPointSummary& moe = analysis.grid_points[5];  // r_a 0.2
  EXPECT_EQ(moe.name, "moe-ra20");
  EXPECT_EQ(moe.seeds, 2);
  ASSERT_TRUE(moe.delta_bpc.has_value());
  EXPECT_LT(*moe.delta_bpc, -0.1) << "an MoE worth 4× compute beats the 1C baseline clearly";
  EXPECT_EQ(moe.verdict, DeltaVerdict::kExceedsSpread);
  ASSERT_TRUE(moe.efficiency_leverage.has_value());
}

TEST(SweepAnalysisTest, DeltaBpcAgainstTheSeedSpread) {
  SweepBuilder sweep;
  sweep.Add("dense-1C-s0", parity::v1::RUN_ROLE_DENSE_BASELINE, 1e20, 1.0, 1.50);
  sweep.Add("dense-1C-s1", parity::v1::RUN_ROLE_DENSE_BASELINE, 1e20, 1.0, 1.52);
  sweep.Add("moe-far-s0", parity::v1::RUN_ROLE_MOE, 1e20, 0.2, 1.40);
  sweep.Add("moe-far-s1", parity::v1::RUN_ROLE_MOE, 1e20, 0.2, 1.42);
  sweep.Add("moe-near-s0", parity::v1::RUN_ROLE_MOE, 1e20, 0.3, 1.50);
  sweep.Add("moe-near-s1", parity::v1::RUN_ROLE_MOE, 1e20, 0.3, 1.51);
  sweep.Add("moe-one", parity::v1::RUN_ROLE_MOE, 1e20, 0.4, 1.3, "strict");
  sweep.Add("dense-1C", parity::v1::RUN_ROLE_DENSE_BASELINE, 1e20, 1.0, 1.6, "strict");
  sweep.Add("moe-orphan", parity::v1::RUN_ROLE_MOE, 1e20, 0.4, 1.3, "other");
  const SweepAnalysis analysis = sweep.Analyze();
  ASSERT_EQ(analysis.grid_points.size(), 6u);
  const GridPointSummary& far = analysis.grid_points[1];
  EXPECT_NEAR(*far.delta_bpc, -0.10, 1e-12);
  EXPECT_NEAR(far.bpc_spread, std::sqrt(0.0002), 1e-12) << "sample SD of 1.40 and 1.42";
  EXPECT_NEAR(far.delta_spread, std::sqrt(0.0004), 1e-12);
  EXPECT_EQ(far.verdict, DeltaVerdict::kExceedsSpread);
  const GridPointSummary& near = analysis.grid_points[2];
  EXPECT_NEAR(*near.delta_bpc, -0.005, 1e-12);
  EXPECT_EQ(near.verdict, DeltaVerdict::kWithinSpread) << "0.005 is inside a spread of ≈ 0.016";
  EXPECT_EQ(analysis.grid_points[3].verdict, DeltaVerdict::kNoSpread) << "one seed each side";
  EXPECT_NEAR(*analysis.grid_points[3].delta_bpc, -0.3, 1e-12);
  EXPECT_EQ(analysis.grid_points[5].verdict, DeltaVerdict::kNoBaseline);
  EXPECT_FALSE(analysis.grid_points[5].delta_bpc.has_value());
  EXPECT_FALSE(analysis.dense_fit.ok()) << "one dense budget";
  EXPECT_NE(analysis.leverage[0].missing_reason.find("no dense law"), std::string::npos);
}

TEST(SweepAnalysisTest, DenseRunsThatRepeatDataStayOutOfTheLaw) {
  SweepBuilder sweep;
  for (double c : {1e20, 2e20, 4e20}) {
    sweep.Add("dense-" + std::to_string(int(c / 1e20)) + "C", parity::v1::RUN_ROLE_DENSE_BASELINE,
              c, 1.0, kA * std::pow(c, -kB) + kC);
  }
  // Strict reuse at 2C: two epochs of the 1C data, worse than the law by the cost of repeating.
  sweep
      .Add("dense-2C", parity::v1::RUN_ROLE_DENSE_BASELINE, 2e20, 1.0,
           kA * std::pow(2e20, -kB) + kC + 0.3, "strict")
      .mutable_accounting()
      ->set_epochs(2);
  const SweepAnalysis analysis = sweep.Analyze();
  ASSERT_TRUE(analysis.dense_fit.ok()) << analysis.dense_fit.status();
  EXPECT_EQ(analysis.dense_fit->points, 3);
  EXPECT_EQ(analysis.dense_fit->repeated_data_excluded, 1);
  EXPECT_NEAR(analysis.dense_fit->b, kB, 1e-3) << "the repeated-data run must not bend the law";

  SweepBuilder two;
  two.Add("dense-1C", parity::v1::RUN_ROLE_DENSE_BASELINE, 1e20, 1.0, 2.0);
  two.Add("dense-2C", parity::v1::RUN_ROLE_DENSE_BASELINE, 2e20, 1.0, 1.9);
  two.Add("dense-4C", parity::v1::RUN_ROLE_DENSE_BASELINE, 4e20, 1.0, 1.8, "strict")
      .mutable_accounting()
      ->set_epochs(4);
  const absl::Status refused = two.Analyze().dense_fit.status();
  EXPECT_EQ(refused.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(refused.message().find("1 dense runs that repeat their data are left out"),
            std::string::npos)
      << refused;
}

TEST(ElLawTest, RecoversTheLawFromItsOwnPredictions) {
  ElLawParams truth;
  truth.a = 1.1;
  truth.d = -0.07;
  truth.gamma = 0.02;
  truth.beta = -0.1;
  std::vector<ElObservation> runs;
  for (double c : {1e19, 1e20, 1e21}) {
    for (double g : {2.0, 4.0, 8.0, 16.0}) {
      for (double a : {0.05, 0.1, 0.25}) {
        runs.push_back({a, g, c, PredictedEfficiencyLeverage(a, g, c, truth)});
      }
    }
  }
  absl::StatusOr<ElLawFit> fit = FitEfficiencyLeverageLaw(runs);
  ASSERT_TRUE(fit.ok()) << fit.status();
  EXPECT_NEAR(fit->fitted.a, truth.a, 1e-6);
  EXPECT_NEAR(fit->fitted.d, truth.d, 1e-6);
  EXPECT_NEAR(fit->fitted.gamma, truth.gamma, 1e-6);
  EXPECT_NEAR(fit->fitted.beta, truth.beta, 1e-6);
  EXPECT_LT(fit->rms_log_residual, 1e-9);
  EXPECT_EQ(fit->published.a, 1.23) << "the published coefficients ride along for comparison";
  EXPECT_EQ(fit->budgets, 3);
  EXPECT_EQ(fit->granularities, 4);

  const std::vector<ElObservation> one_budget(runs.begin() + 24, runs.end());
  const absl::Status status = FitEfficiencyLeverageLaw(one_budget).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(status.message().find("1 budgets"), std::string::npos) << status;
}

}  // namespace
}  // namespace parity::core
