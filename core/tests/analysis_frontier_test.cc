// The compute-optimal dense frontier and the EL measured against it, on synthetic sweeps with a
// KNOWN frontier (Chinchilla's L(N, D) = E + A/N^α + B/D^β, several sizes per budget, the
// optimal size growing with C); extrapolation flags; ΔBPC against every dense baseline of a
// group; a run shared by two groups counted once.
#include <cmath>
#include <deque>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/analysis.h"
#include "core/analysis_stats.h"
#include "gtest/gtest.h"

namespace parity::core {
namespace {

// Chinchilla's fit (Hoffmann et al. 2022), in nats; C = 6·N·D.
constexpr double kE = 1.69, kA = 406.4, kB = 410.7, kAlpha = 0.34, kBeta = 0.28;
double Loss(double n, double c) {
  return kE + kA / std::pow(n, kAlpha) + kB / std::pow(c / (6 * n), kBeta);
}

// The true frontier: the minimum over N of Loss(N, C), by a fine scan in ln N.
double OptimalLoss(double c) {
  double best = 1e300;
  for (double ln = std::log(1e6); ln < std::log(1e12); ln += 1e-3)
    best = std::min(best, Loss(std::exp(ln), c));
  return best;
}

// Dense runs at 5 budgets × 7 sizes (a factor 2 apart around the optimum), `seeds` each.
std::vector<DenseRun> IsoFlopRuns(int seeds, double noise) {
  stats::Rng rng(3);
  std::vector<DenseRun> runs;
  for (double c : {1e18, 1e19, 1e20, 1e21, 1e22}) {
    const double n_opt = 0.6 * std::pow(c / 6, 0.5);  // near the optimum; the scan finds it
    for (int k = -3; k <= 3; ++k) {
      const double n = n_opt * std::pow(2.0, k);
      for (int s = 0; s < seeds; ++s) {
        const double u1 = (static_cast<double>(rng.Next() >> 11) + 0.5) / 9007199254740992.0;
        const double u2 = (static_cast<double>(rng.Next() >> 11) + 0.5) / 9007199254740992.0;
        const double z = std::sqrt(-2 * std::log(u1)) * std::cos(2 * M_PI * u2);
        runs.push_back({absl::StrCat("d", c, "-", k, "-", s), c, n, Loss(n, c) + noise * z});
      }
    }
  }
  return runs;
}

TEST(FrontierTest, RecoversAKnownComputeOptimalFrontier) {
  absl::StatusOr<DenseFrontier> frontier = BuildDenseFrontier(IsoFlopRuns(1, 0));
  ASSERT_TRUE(frontier.ok()) << frontier.status();
  ASSERT_EQ(frontier->points.size(), 5u);
  for (const FrontierPoint& p : frontier->points) EXPECT_EQ(p.sizes, 7);
  EXPECT_GT(frontier->points.back().params, 10 * frontier->points.front().params)
      << "the optimal size must grow with compute";
  ASSERT_TRUE(frontier->law.ok()) << frontier->law.status();
  for (double c : {1e18, 3e19, 1e21, 1e22}) {
    EXPECT_NEAR(DenseLoss(*frontier->law, c) / OptimalLoss(c), 1.0, 0.02)
        << "L*(C) should be within 2% of the true frontier at C = " << c;
  }
  // An MoE that reaches the true frontier loss of 4e20 while spending 1e20 has frontier EL ≈ 4.
  const MoePointRuns moe{.compute = 1e20, .bpc = {OptimalLoss(4e20)}, .keys = {"moe"}};
  const LeverageEstimate el = GridPointLeverage(LeverageKind::kFrontier, *frontier, moe);
  ASSERT_TRUE(el.value.has_value()) << el.missing_reason;
  EXPECT_NEAR(*el.value / 4.0, 1.0, 0.1);
  EXPECT_FALSE(el.extrapolated);
  EXPECT_NE(el.interval_note.find("one seed per dense size"), std::string::npos)
      << el.interval_note;
}

TEST(FrontierTest, FixedNLeverageOverstatesTheFrontierOne) {
  // One dense size, the optimum of the largest budget: at the smaller budgets it sees far too few
  // tokens, so its own law lies above the frontier and an MoE looks better against it than
  // against compute-optimal dense models (the reviewer's finding on docs/study).
  const std::vector<DenseRun> all = IsoFlopRuns(1, 0);
  std::vector<DenseRun> one_shape;
  const double n = all[4 * 7 + 3].params;  // the middle size of the 1e22 budget
  for (double c : {1e18, 1e19, 1e20, 1e21, 1e22})
    one_shape.push_back({absl::StrCat("f", c), c, n, Loss(n, c)});

  absl::StatusOr<DenseFrontier> frontier = BuildDenseFrontier(all);
  absl::StatusOr<DenseFrontier> fixed = BuildDenseFrontier(one_shape);
  ASSERT_TRUE(frontier.ok() && fixed.ok());
  const MoePointRuns moe{.compute = 1e20, .bpc = {OptimalLoss(2e20)}, .keys = {"moe"}};
  const LeverageEstimate f = GridPointLeverage(LeverageKind::kFrontier, *frontier, moe);
  const LeverageEstimate x = GridPointLeverage(LeverageKind::kFixedN, *fixed, moe);
  ASSERT_TRUE(f.value && x.value) << f.missing_reason << x.missing_reason;
  EXPECT_EQ(x.kind, LeverageKind::kFixedN);
  EXPECT_GT(*x.value, 1.5 * *f.value) << "the fixed-N EL inflates the papers' EL";
}

TEST(FrontierTest, ExtrapolationIsFlaggedWithItsFactor) {
  absl::StatusOr<DenseFrontier> frontier = BuildDenseFrontier(IsoFlopRuns(1, 0));
  ASSERT_TRUE(frontier.ok() && frontier->law.ok());
  // Reaching the frontier loss of 3e22 needs 3× the largest dense budget (1e22).
  const MoePointRuns above{
      .compute = 1e21, .bpc = {DenseLoss(*frontier->law, 3e22)}, .keys = {"a"}};
  const LeverageEstimate el = GridPointLeverage(LeverageKind::kFrontier, *frontier, above);
  ASSERT_TRUE(el.value.has_value()) << el.missing_reason;
  EXPECT_TRUE(el.extrapolated);
  EXPECT_NEAR(el.extrapolation_factor, 3.0, 1e-6);
  const MoePointRuns below{
      .compute = 1e17, .bpc = {DenseLoss(*frontier->law, 5e17)}, .keys = {"b"}};
  const LeverageEstimate low = GridPointLeverage(LeverageKind::kFrontier, *frontier, below);
  EXPECT_TRUE(low.extrapolated);
  EXPECT_NEAR(low.extrapolation_factor, 2.0, 1e-6) << "min C / C_dense below the range";
  const MoePointRuns inside{
      .compute = 1e20, .bpc = {DenseLoss(*frontier->law, 3e20)}, .keys = {"c"}};
  EXPECT_FALSE(GridPointLeverage(LeverageKind::kFrontier, *frontier, inside).extrapolated);
}

TEST(FrontierTest, IntervalCarriesBothSidesNoise) {
  absl::StatusOr<DenseFrontier> frontier = BuildDenseFrontier(IsoFlopRuns(2, 0.003));
  ASSERT_TRUE(frontier.ok() && frontier->law.ok()) << frontier.status();
  EXPECT_TRUE(frontier->replicate_note.empty()) << frontier->replicate_note;
  const double loss = DenseLoss(*frontier->law, 4e20);
  const MoePointRuns tight{.compute = 1e20, .bpc = {loss, loss, loss}, .keys = {"m0", "m1", "m2"}};
  const MoePointRuns noisy{
      .compute = 1e20, .bpc = {loss - 0.03, loss, loss + 0.03}, .keys = {"m0", "m1", "m2"}};
  const LeverageEstimate a = GridPointLeverage(LeverageKind::kFrontier, *frontier, tight);
  const LeverageEstimate b = GridPointLeverage(LeverageKind::kFrontier, *frontier, noisy);
  ASSERT_TRUE(a.interval && b.interval) << a.interval_note << b.interval_note;
  EXPECT_GT(a.interval->high, a.interval->low) << "dense seeds alone give a spread";
  EXPECT_GT(b.interval->high - b.interval->low, 2 * (a.interval->high - a.interval->low))
      << "the MoE seeds' spread must widen the interval";
  EXPECT_LE(b.interval->low, 4.0);
  EXPECT_GE(b.interval->high, 4.0);
}

TEST(FrontierTest, FewerThanThreeBudgetsGiveAReason) {
  const std::vector<DenseRun> two = {
      {"a", 1e20, 1e8, 2.0}, {"b", 2e20, 1e8, 1.9}, {"c", 2e20, 2e8, 1.85}};
  absl::StatusOr<DenseFrontier> frontier = BuildDenseFrontier(two);
  ASSERT_TRUE(frontier.ok());
  EXPECT_EQ(frontier->points.size(), 2u);
  EXPECT_DOUBLE_EQ(frontier->points[1].bpc, 1.85) << "the better size wins its budget";
  ASSERT_FALSE(frontier->law.ok());
  EXPECT_NE(frontier->law.status().message().find("≥ 3 distinct compute budgets"),
            std::string::npos);
  const LeverageEstimate el = GridPointLeverage(LeverageKind::kFrontier, *frontier,
                                                {.compute = 1e20, .bpc = {1.9}, .keys = {"m"}});
  EXPECT_FALSE(el.value.has_value());
  EXPECT_NE(el.missing_reason.find("no dense law"), std::string::npos) << el.missing_reason;
}

class Sweep {
 public:
  // `also`: memberships passed explicitly; none → the analysis reads them from the spec
  // (GroupMembershipsOf: also_serves and the ablation axes in `point`).
  parity::v1::RunSpec& Add(const std::string& name, parity::v1::RunRole role,
                           const std::string& budget, double multiple, double ra, double bpc,
                           std::vector<GroupMembership> also = {},
                           const std::map<std::string, std::string>& point = {}) {
    parity::v1::RunSpec spec;
    spec.mutable_grid_point()->insert(point.begin(), point.end());
    spec.set_name(name);
    spec.set_role(role);
    spec.set_compute_budget(budget);
    spec.set_data_variant("unique");
    spec.set_compute_multiple(multiple);
    spec.mutable_accounting()->set_compute_flops((budget == "C1" ? 1e20 : 2e20) * multiple);
    spec.mutable_accounting()->set_activation_rate(ra);
    spec.mutable_accounting()->set_params(1000000);
    specs_.push_back(std::move(spec));
    runs_.push_back({"id-" + name, &specs_.back(), bpc, {}});
    if (!also.empty()) {
      runs_.back().memberships.push_back(
          {budget, "unique", multiple, {}, "", parity::v1::RUN_ROLE_UNSPECIFIED});
      for (GroupMembership& m : also) runs_.back().memberships.push_back(std::move(m));
    }
    return specs_.back();
  }
  SweepAnalysis Analyze() { return AnalyzeFinishedRuns(runs_); }
  const parity::v1::RunSpec& spec(size_t i) const { return specs_[i]; }

 private:
  std::deque<parity::v1::RunSpec> specs_;
  std::vector<FinishedRun> runs_;
};

TEST(BaselinesTest, DeltaAgainstEveryDenseBaselineOfTheGroup) {
  Sweep sweep;
  const auto dense = parity::v1::RUN_ROLE_DENSE_BASELINE;
  for (int s = 0; s < 3; ++s) {
    sweep.Add(absl::StrCat("dense-1C-s", s), dense, "C1", 1, 1, 1.50 + 0.01 * s);
    sweep.Add(absl::StrCat("dense-1.91C-s", s), dense, "C1", 1.91, 1, 1.40 + 0.01 * s);
    sweep.Add(absl::StrCat("moe-ra20-s", s), parity::v1::RUN_ROLE_MOE, "C1", 1, 0.2,
              1.395 + 0.01 * s);
  }
  const SweepAnalysis analysis = sweep.Analyze();
  const GridPointSummary* moe = nullptr;
  for (const GridPointSummary& p : analysis.grid_points) {
    if (p.name == "moe-ra20") moe = &p;
  }
  ASSERT_NE(moe, nullptr);
  ASSERT_EQ(moe->baselines.size(), 2u) << "one ΔBPC per dense baseline of the group";
  const BaselineDelta& one = moe->baselines[0];
  const BaselineDelta& kc = moe->baselines[1];
  EXPECT_EQ(one.baseline, "dense-1C");
  EXPECT_DOUBLE_EQ(one.compute_multiple, 1);
  EXPECT_NEAR(one.delta_bpc, -0.105, 1e-12);
  EXPECT_EQ(one.verdict, DeltaVerdict::kExceedsSpread);
  ASSERT_TRUE(one.welch_p.has_value());
  EXPECT_LT(*one.welch_p, 0.001);
  EXPECT_EQ(kc.baseline, "dense-1.91C");
  EXPECT_DOUBLE_EQ(kc.compute_multiple, 1.91);
  EXPECT_NEAR(kc.delta_bpc, -0.005, 1e-12);
  EXPECT_EQ(kc.verdict, DeltaVerdict::kWithinSpread) << "0.005 is inside a spread of ≈ 0.014";
  ASSERT_TRUE(kc.welch_p.has_value());
  EXPECT_GT(*kc.welch_p, 0.5);
  EXPECT_NEAR(*moe->delta_bpc, -0.105, 1e-12) << "the 1C fields keep today's meaning";
  EXPECT_EQ(moe->verdict, DeltaVerdict::kExceedsSpread);
}

TEST(SharedRunsTest, ARunServingTwoGroupsIsOneRun) {
  Sweep sweep;
  const auto dense = parity::v1::RUN_ROLE_DENSE_BASELINE;
  // dense at 2e20 is Dense-2C of C1 and Dense-1C of C2: one run, two memberships.
  for (int s = 0; s < 2; ++s) {
    sweep.Add(absl::StrCat("dense-1C-C1-s", s), dense, "C1", 1, 1, 2.00 + 0.01 * s);
    sweep.Add(absl::StrCat("dense-2C-C1-s", s), dense, "C1", 2, 1, 1.80 + 0.01 * s,
              {{"C2", "unique", 1, {}, "", parity::v1::RUN_ROLE_UNSPECIFIED}});
    sweep.Add(absl::StrCat("dense-2C-C2-s", s), dense, "C2", 2, 1, 1.65 + 0.01 * s);
  }
  for (double ra : {0.1, 0.2, 0.4}) {
    for (int s = 0; s < 2; ++s) {
      const double bump = ra == 0.2 ? 0 : 0.05;
      sweep.Add(absl::StrCat("moe-ra", ra, "-C1-s", s), parity::v1::RUN_ROLE_MOE, "C1", 1, ra,
                1.70 + bump + 0.01 * s);
      sweep.Add(absl::StrCat("moe-ra", ra, "-C2-s", s), parity::v1::RUN_ROLE_MOE, "C2", 1, ra,
                1.55 + bump + 0.01 * s);
    }
  }
  const SweepAnalysis analysis = sweep.Analyze();
  ASSERT_TRUE(analysis.dense_fit.ok()) << analysis.dense_fit.status();
  EXPECT_EQ(analysis.dense_fit->points, 6) << "3 budgets × 2 seeds: the shared run counted once";
  ASSERT_TRUE(analysis.frontier.ok());
  EXPECT_EQ(analysis.frontier->runs, 6);
  int c2_baselines = 0;
  for (const GridPointSummary& p : analysis.grid_points) {
    if (p.name == "dense-2C-C1" && p.group == "C2/unique") {
      EXPECT_DOUBLE_EQ(p.compute_multiple, 1) << "in C2 the shared run is Dense-1C";
      EXPECT_EQ(p.verdict, DeltaVerdict::kIsBaseline);
    }
    if (p.group == "C2/unique" && p.role == parity::v1::RUN_ROLE_MOE && p.name == "moe-ra0.2-C2") {
      c2_baselines = static_cast<int>(p.baselines.size());
      ASSERT_TRUE(p.delta_bpc.has_value());
      EXPECT_NEAR(*p.delta_bpc, 1.555 - 1.805, 1e-12) << "against the shared run as Dense-1C of C2";
    }
  }
  EXPECT_EQ(c2_baselines, 2) << "C2 has Dense-1C (the shared run) and Dense-2C";
}

// Groups as the planner writes them into RunSpecs (no memberships passed): a run's also_serves
// makes it a member of every group it serves, and an MoE point's ablation axes split its group.
TEST(SharedRunsTest, GroupsComeFromAlsoServesAndAblationAxesOfTheSpec) {
  Sweep sweep;
  const auto dense = parity::v1::RUN_ROLE_DENSE_BASELINE;
  for (int s = 0; s < 2; ++s) {
    sweep.Add(absl::StrCat("dense-1C-C1-s", s), dense, "C1", 1, 1, 2.00 + 0.01 * s);
    parity::v1::RunSpec& shared =
        sweep.Add(absl::StrCat("dense-2C-C1-s", s), dense, "C1", 2, 1, 1.80 + 0.01 * s);
    parity::v1::GroupRef* also = shared.add_also_serves();
    also->set_compute_budget("C2");
    also->set_data_variant("unique");
    also->set_role(dense);
    also->set_compute_multiple(1);
    also->set_name(absl::StrCat("dense-1C-C2-s", s));
    for (const char* layout : {"all-moe", "1dense+SE"}) {
      for (double ra : {0.1, 0.2, 0.4}) {
        sweep.Add(absl::StrCat("moe-", layout, "-ra", ra, "-C2-s", s), parity::v1::RUN_ROLE_MOE,
                  "C2", 1, ra, 1.60 + (ra == 0.2 ? 0 : 0.05) + 0.01 * s, {},
                  {{"layout", layout}, {"top_k", "2"}});
      }
    }
  }
  const std::vector<GroupMembership> groups = GroupMembershipsOf(sweep.spec(1));
  ASSERT_EQ(groups.size(), 2u) << "its own group and the one it also serves";
  EXPECT_EQ(GroupKey(groups[1]), "C2/unique");
  EXPECT_DOUBLE_EQ(groups[1].compute_multiple, 1);
  EXPECT_EQ(GroupKey(GroupMembershipsOf(sweep.spec(2))[0]), "C2/unique/layout=all-moe/top_k=2");

  const SweepAnalysis analysis = sweep.Analyze();
  std::vector<std::string> keys;
  for (const OptimalActivationGroup& g : analysis.optimal_activation) keys.push_back(g.group);
  EXPECT_EQ(keys, (std::vector<std::string>{"C2/unique/layout=all-moe/top_k=2",
                                            "C2/unique/layout=1dense+SE/top_k=2"}))
      << "one region per ablation setting";
  int compared = 0;
  bool named_in_c2 = false;
  for (const GridPointSummary& p : analysis.grid_points) {
    if (p.group == "C2/unique" && p.name == "dense-1C-C2") {
      named_in_c2 = true;
      EXPECT_EQ(p.verdict, DeltaVerdict::kIsBaseline);
    }
    if (p.role != parity::v1::RUN_ROLE_MOE) continue;
    ASSERT_TRUE(p.delta_bpc.has_value()) << p.name << ": the shared run is C2's Dense-1C";
    EXPECT_EQ(p.baselines.size(), 1u) << p.name;
    ++compared;
  }
  EXPECT_EQ(compared, 6) << "every MoE point of both layouts compared with the one baseline";
  EXPECT_TRUE(named_in_c2) << "in C2 the shared run goes by the name it has there";
}

TEST(SharedRunsTest, BootstrapDrawsDependOnTheRunNotTheGroup) {
  // The same two points, listed in different orders and beside a different third point: the
  // best-point probabilities of the shared points agree exactly, because each run's draw is a
  // function of its id alone.
  const std::vector<RateRun> a = {{0.1, 1.20, "x0"},  {0.1, 1.22, "x1"}, {0.2, 1.205, "y0"},
                                  {0.2, 1.215, "y1"}, {0.4, 1.6, "z0"},  {0.4, 1.61, "z1"}};
  const std::vector<RateRun> b = {{0.4, 1.7, "w0"},   {0.4, 1.71, "w1"}, {0.2, 1.215, "y1"},
                                  {0.2, 1.205, "y0"}, {0.1, 1.22, "x1"}, {0.1, 1.20, "x0"}};
  absl::StatusOr<OptimalActivationFit> fa = FitOptimalActivation(a), fb = FitOptimalActivation(b);
  ASSERT_TRUE(fa.ok() && fb.ok());
  EXPECT_GT(fa->grid[0].probability_best, 0.2);
  EXPECT_DOUBLE_EQ(fa->grid[0].probability_best, fb->grid[0].probability_best);
  EXPECT_DOUBLE_EQ(fa->grid[1].probability_best, fb->grid[1].probability_best);
  EXPECT_DOUBLE_EQ(stats::KeyedNormal(7, 3, "run-a"), stats::KeyedNormal(7, 3, "run-a"));
  EXPECT_NE(stats::KeyedNormal(7, 3, "run-a"), stats::KeyedNormal(7, 3, "run-b"));
  EXPECT_NE(stats::KeyedNormal(7, 3, "run-a"), stats::KeyedNormal(7, 4, "run-a"));
}

TEST(StatsTest, TailsMatchPublishedTables) {
  EXPECT_NEAR(stats::StudentTUpperTail(1.886, 2), 0.10, 5e-4) << "t(0.90, 2) = 1.886";
  EXPECT_NEAR(stats::StudentTUpperTail(2.015, 5), 0.05, 5e-4) << "t(0.95, 5) = 2.015";
  EXPECT_NEAR(stats::StudentTQuantile(0.05, 14), 1.761, 1e-3);
  EXPECT_NEAR(stats::FUpperTail(3.11, 2, 10), 0.09, 2e-3) << "F(2, 10) = 3.11 at the 91st pct";
  EXPECT_NEAR(stats::FUpperTail(2.92, 2, 10), 0.10, 1e-3) << "F(0.90; 2, 10) = 2.92";
}

}  // namespace
}  // namespace parity::core
