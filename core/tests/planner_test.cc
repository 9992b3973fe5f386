// The planner end to end: shapes within tolerance, compute-matched tokens, data reuse, the Step
// Law, warmup, grid expansion and names, the run-count guard, and every example spec.
#include "core/planner.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "core/field_violation.h"
#include "core/hyperparameters.h"
#include "core/planner_sharing.h"
#include "core/planner_warnings.h"
#include "core/spec_loader.h"
#include "gtest/gtest.h"

namespace parity::core {
namespace {

using parity::v1::RunSpec;
using parity::v1::SweepSpec;

constexpr char kSpec[] = R"(
name: plan
moe:
  d_model: 128
  num_layers: 4
  num_heads: 8
  ffn_ratio: 3
  moe: {layout: 1dense+SE, total_ffn_ratio: 16}
dense: {ffn_ratio: 3, head_dim: 16, aspect_ratio: 64}
training: {learning_rate: 1e-3, batch_tokens: 256, sequence_length: 64}
data: {corpus: kjv}
grid:
  moe: [{target_activation_rate: 0.3}, {target_activation_rate: 0.5}]
  compute: [{name: C1, compute_flops: 1e11}]
  data: [{reuse: unique}, {name: strict, reuse: strict}, {reuse: loose, epochs: 4}]
baselines: [{compute_multiple: 1}, {compute_multiple: 2}]
)";

SweepSpec Spec(const char* text = kSpec) {
  absl::StatusOr<SweepSpec> spec = ParseSweepSpec(text, SpecFormat::kYaml);
  EXPECT_TRUE(spec.ok()) << spec.status();
  return *spec;
}

std::vector<RunSpec> MustPlan(const SweepSpec& spec) {
  absl::StatusOr<std::vector<RunSpec>> runs = PlanSweep(spec);
  EXPECT_TRUE(runs.ok()) << "expected the spec to plan, got: " << runs.status();
  return runs.ok() ? *runs : std::vector<RunSpec>{};
}

const RunSpec* Find(const std::vector<RunSpec>& runs, const std::string& name) {
  for (const RunSpec& r : runs) {
    if (r.name() == name) return &r;
  }
  ADD_FAILURE() << "no run named " << name;
  return nullptr;
}

TEST(PlannerTest, HitsTargetParamsAndActivationRates) {
  const auto runs = MustPlan(Spec());
  ASSERT_EQ(runs.size(), (2u + 2u) * 3 - 1)
      << "dense 1C under strict reuse of its own D is the unique-data run, planned once";
  for (const RunSpec& r : runs) {
    if (r.role() != parity::v1::RUN_ROLE_MOE) continue;
    EXPECT_LE(std::fabs(r.accounting().params_error()), 0.02)
        << r.name() << ": N " << r.accounting().params() << " misses the target "
        << r.model().target_params() << " by more than 2%";
    EXPECT_NEAR(r.accounting().activation_rate(), r.model().moe().target_activation_rate(),
                0.1 * r.model().moe().target_activation_rate())
        << r.name() << ": r_a should be near its target";
    EXPECT_EQ(r.model().moe().expert_hidden() % 32, 0u) << r.name() << ": D_e multiple of 32";
    EXPECT_EQ(r.model().moe().shared_expert_hidden(),
              r.model().moe().top_k() * r.model().moe().expert_hidden())
        << "1dense+SE: D_se = K·D_e";
    EXPECT_GT(r.predicted_efficiency_leverage(), 0) << r.name() << ": EL prediction missing";
  }
}

TEST(PlannerTest, TokensAreComputeMatchedAndComputeIsMTimesD) {
  const auto runs = MustPlan(Spec());
  for (const RunSpec& r : runs) {
    const auto& a = r.accounting();
    EXPECT_DOUBLE_EQ(a.compute_flops(), a.flops_per_token() * double(a.tokens())) << r.name();
    const double half_batch = 0.5 * double(r.training().batch_tokens());
    EXPECT_NEAR(a.compute_flops(), 1e11 * r.compute_multiple(),
                (half_batch + 1) * a.flops_per_token())
        << r.name() << ": C must match the budget to within half a batch of tokens";
    EXPECT_EQ(a.tokens(), r.training().steps() * r.training().batch_tokens())
        << r.name() << ": D is whole steps of B, exactly what the engine consumes";
  }
  const RunSpec* dense1 = Find(runs, "dense-1C-C1-unique-s0");
  const RunSpec* dense2 = Find(runs, "dense-2C-C1-unique-s0");
  ASSERT_TRUE(dense1 && dense2);
  EXPECT_NEAR(double(dense2->accounting().tokens()) / dense1->accounting().tokens(), 2.0, 1e-3)
      << "token counts are rounded to whole tokens";
}

TEST(PlannerTest, DataReuseModes) {
  const auto runs = MustPlan(Spec());
  const RunSpec* dense1 = Find(runs, "dense-1C-C1-unique-s0");
  const RunSpec* strict = Find(runs, "moe-ra30-C1-strict-s0");
  const RunSpec* loose = Find(runs, "moe-ra30-C1-loose4ep-s0");
  const RunSpec* unique = Find(runs, "moe-ra30-C1-unique-s0");
  const RunSpec* strict_dense2 = Find(runs, "dense-2C-C1-strict-s0");
  ASSERT_TRUE(dense1 && strict && loose && unique && strict_dense2);
  EXPECT_EQ(unique->accounting().unique_tokens(), unique->accounting().tokens());
  EXPECT_DOUBLE_EQ(unique->accounting().epochs(), 1.0);
  EXPECT_EQ(strict->accounting().unique_tokens(), dense1->accounting().tokens())
      << "strict D̂ defaults to the 1C dense baseline's D";
  EXPECT_GT(strict->accounting().epochs(), 1.0) << "the MoE consumes more tokens than dense 1C";
  EXPECT_NEAR(strict_dense2->accounting().epochs(), 2.0, 1e-3);
  EXPECT_NEAR(loose->accounting().epochs(), 4.0, 1e-3);
  EXPECT_EQ(strict->data().reuse(), parity::v1::REUSE_MODE_STRICT);
  EXPECT_EQ(strict->data().unique_tokens(), strict->accounting().unique_tokens());
}

TEST(PlannerTest, StepLawAndWarmup) {
  SweepSpec spec = Spec();
  spec.mutable_training()->set_rule(parity::v1::HYPERPARAMETER_RULE_STEP_LAW);
  spec.mutable_training()->clear_learning_rate();
  spec.mutable_training()->clear_batch_tokens();
  for (const RunSpec& r : MustPlan(spec)) {
    const double n = double(r.accounting().active_params());
    const double d = double(r.accounting().tokens());
    // The rule sees the nominal D = C/M; the recorded D is rounded to whole batches, so η may
    // differ by the 0.307th power of under half a batch.
    const double eta = 1.79 * std::pow(n, -0.713) * std::pow(d, 0.307);
    const double rounding = 0.307 * 0.5 * double(r.training().batch_tokens()) / d;
    EXPECT_NEAR(r.training().learning_rate(), eta, eta * rounding * 1.01 + 1e-12)
        << r.name() << ": η = 1.79·N_a^-0.713·D^0.307";
    EXPECT_EQ(r.training().batch_tokens() % 64, 0u) << "B rounded to a multiple of S";
    EXPECT_NEAR(double(r.training().batch_tokens()), 0.58 * std::pow(d, 0.571), 32.0 + 1e-9);
  }
  EXPECT_EQ(DefaultWarmupSteps(100000), 1000u) << "1% of steps";
  EXPECT_EQ(DefaultWarmupSteps(500000), 2000u) << "clipped at 2000";
  EXPECT_EQ(DefaultWarmupSteps(10000), 200u) << "at least 200 when the run is long enough";
  EXPECT_EQ(DefaultWarmupSteps(300), 30u) << "capped at 10% for a micro run";
}

// A run planned from a spec checkpoints at least every 5% of its steps and every 10 minutes, so
// a killed run loses at most one interval; a spec's own cadence, 0 included, is kept.
TEST(PlannerTest, RunsCheckpointEveryTwentiethOfTheRunAndEveryTenMinutesByDefault) {
  for (const RunSpec& r : MustPlan(Spec())) {
    ASSERT_TRUE(r.training().has_checkpoint_every_steps()) << r.name();
    EXPECT_EQ(r.training().checkpoint_every_steps(),
              std::max<uint64_t>(1, (r.training().steps() + 19) / 20))
        << r.name() << ": expected ceil(steps / 20) for " << r.training().steps() << " steps";
    EXPECT_EQ(r.training().checkpoint_every_seconds(), 600u) << r.name();
  }
  SweepSpec explicit_spec = Spec();
  explicit_spec.mutable_training()->set_checkpoint_every_steps(0);
  explicit_spec.mutable_training()->set_checkpoint_every_seconds(30);
  for (const RunSpec& r : MustPlan(explicit_spec)) {
    EXPECT_EQ(r.training().checkpoint_every_steps(), 0u) << r.name() << ": the spec's 0 is kept";
    EXPECT_EQ(r.training().checkpoint_every_seconds(), 30u) << r.name();
  }
}

TEST(PlannerTest, GridExpansionNamesAndOrder) {
  SweepSpec spec = Spec();
  spec.mutable_grid()->add_seeds(0);
  spec.mutable_grid()->add_seeds(7);
  (*spec.mutable_labels())["team"] = "moe";
  auto* axis = spec.mutable_grid()->add_hyperparameters();
  axis->set_field("learning_rate");
  axis->add_values(1e-3);
  axis->add_values(3e-3);
  const auto runs = MustPlan(spec);
  ASSERT_EQ(runs.size(), 4u * 3 * 2 * 2 - 4)
      << "(2 MoE + 2 dense) × 3 data × 2 seeds × 2 lr, less dense 1C strict (= dense 1C unique)";
  std::set<std::string> names;
  for (const RunSpec& r : runs) {
    EXPECT_TRUE(names.insert(r.name()).second) << "duplicate run name " << r.name();
    EXPECT_EQ(r.sweep_name(), "plan");
    EXPECT_EQ(r.labels().at("team"), "moe") << "SweepSpec.labels are copied to every run";
  }
  EXPECT_EQ(runs[0].name(), "moe-ra30-C1-unique-s0-lr0.001");
  EXPECT_EQ(runs[1].name(), "moe-ra30-C1-unique-s0-lr0.003");
  const RunSpec* r = Find(runs, "dense-2C-C1-strict-s7-lr0.003");
  ASSERT_TRUE(r);
  EXPECT_DOUBLE_EQ(r->training().learning_rate(), 3e-3);
  EXPECT_EQ(r->training().seed(), 7u);
  EXPECT_EQ(r->grid_point().at("baseline"), "dense-2C");
  EXPECT_EQ(r->grid_point().at("learning_rate"), "0.003");
}

TEST(PlannerTest, DenseTokensBudgetSetsComputeFromTheDenseModel) {
  SweepSpec spec = Spec();
  auto* budget = spec.mutable_grid()->mutable_compute(0);
  budget->clear_compute_flops();
  budget->set_dense_tokens(1000000);
  const auto runs = MustPlan(spec);
  const RunSpec* dense1 = Find(runs, "dense-1C-C1-unique-s0");
  ASSERT_TRUE(dense1);
  const uint64_t batch = dense1->training().batch_tokens();
  EXPECT_NEAR(double(dense1->accounting().tokens()), 1e6, 0.5 * double(batch))
      << "C = M_dense·D, so dense 1C gets D back, rounded to whole batches";
  EXPECT_EQ(dense1->accounting().tokens() % batch, 0u);
}

TEST(PlannerTest, UnreachableActivationRateNamesTheGridPoint) {
  SweepSpec spec = Spec();
  spec.mutable_grid()->mutable_moe(1)->set_target_activation_rate(0.01);
  absl::StatusOr<std::vector<RunSpec>> runs = PlanSweep(spec);
  ASSERT_EQ(runs.status().code(), absl::StatusCode::kInvalidArgument);
  const auto violations = FieldViolationsOf(runs.status());
  ASSERT_EQ(violations.size(), 1u) << runs.status();
  EXPECT_EQ(violations[0].field, "grid.moe[1]");
  EXPECT_NE(violations[0].description.find("out of reach"), std::string::npos)
      << violations[0].description;
}

TEST(PlannerTest, DenseShapeOutsideTheToleranceIsAViolation) {
  SweepSpec spec = Spec();
  spec.mutable_dense()->set_d_model(256);
  spec.mutable_dense()->set_num_layers(8);
  spec.mutable_dense()->clear_head_dim();
  spec.mutable_dense()->set_num_heads(4);
  absl::StatusOr<std::vector<RunSpec>> runs = PlanSweep(spec);
  ASSERT_EQ(runs.status().code(), absl::StatusCode::kInvalidArgument);
  const auto violations = FieldViolationsOf(runs.status());
  ASSERT_FALSE(violations.empty());
  EXPECT_EQ(violations[0].field, "dense");
  EXPECT_NE(violations[0].description.find("from the target N"), std::string::npos)
      << violations[0].description;
}

TEST(PlannerTest, InvalidSpecReturnsEveryViolation) {
  SweepSpec spec = Spec();
  spec.clear_name();
  spec.mutable_training()->set_sequence_length(0);
  absl::StatusOr<std::vector<RunSpec>> runs = PlanSweep(spec);
  ASSERT_EQ(runs.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_GE(FieldViolationsOf(runs.status()).size(), 2u) << runs.status();
}

TEST(PlannerTest, RefusesSweepsOverTenThousandRuns) {
  SweepSpec spec = Spec();
  for (int i = 0; i < 1000; ++i) spec.mutable_grid()->add_seeds(i);  // 12 × 1000 runs
  absl::StatusOr<std::vector<RunSpec>> runs = PlanSweep(spec);
  ASSERT_EQ(runs.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(runs.status().message().find("over the limit of 10000"), absl::string_view::npos)
      << runs.status();
}

// Every example plans; the published 7B study keeps its published structure.
TEST(PlannerTest, EveryExamplePlans) {
  int examples = 0;
  for (const auto& entry : std::filesystem::directory_iterator("examples")) {
    if (entry.path().extension() != ".yaml") continue;
    ++examples;
    absl::StatusOr<SweepSpec> spec = LoadSweepSpecFile(entry.path());
    ASSERT_TRUE(spec.ok()) << entry.path() << ": " << spec.status();
    absl::StatusOr<std::vector<RunSpec>> runs = PlanSweep(*spec);
    EXPECT_TRUE(runs.ok()) << entry.path() << ": " << runs.status();
  }
  EXPECT_GE(examples, 5) << "expected the five examples under examples/";
}

TEST(PlannerTest, ExampleSizes) {
  auto count = [](const char* path) -> size_t {
    absl::StatusOr<SweepSpec> spec = LoadSweepSpecFile(path);
    if (!spec.ok()) return 0;
    absl::StatusOr<std::vector<RunSpec>> runs = PlanSweep(*spec);
    return runs.ok() ? runs->size() : 0;
  };
  EXPECT_EQ(count("examples/micro.yaml"), 22u) << "24 cells; dense 1C strict = dense 1C unique";
  EXPECT_EQ(count("examples/full_study_2b.yaml"), 222u)
      << "243 cells; dense 2C of C1, C2 = dense 1C of C2, C3 under unique and loose data (12) and "
         "dense 1C strict = dense 1C unique (9), each planned once";
  EXPECT_EQ(count("examples/equal_resources_7b.yaml"), 21u)
      << "8 MoE × 2 data + dense 1C, 2C × 2 data + dense 1.91C on unique data (once)";
  EXPECT_EQ(count("examples/published_2b.yaml"), 3u);
  EXPECT_EQ(count("examples/cpu_study.yaml"), 51u)
      << "5 r_a × 2 budgets × 3 seeds + dense 1C, 2C and sizes 0.5/1/2 × 2 budgets × 3 seeds, "
         "less dense 2C-C1 = 1C-C2 and the 1× size = dense 1C (planned once)";
}

// The published equal-resources setup: at C1 = 2.86e21 the 1C dense baseline consumes ≈ 68B
// tokens (the paper's strict-reuse budget), and an MoE at r_a ≈ 20% consumes ≈ 4.6× the dense
// model's tokens (docs/domain.md, 1/R_c).
TEST(PlannerTest, SevenBStudyMatchesThePublishedBudgets) {
  absl::StatusOr<SweepSpec> spec = LoadSweepSpecFile("examples/equal_resources_7b.yaml");
  ASSERT_TRUE(spec.ok()) << spec.status();
  const auto runs = MustPlan(*spec);
  const RunSpec* dense = Find(runs, "dense-1C-C1-unique-s0");
  const RunSpec* moe20 = Find(runs, "moe-ra20-C1-unique-s0");
  ASSERT_TRUE(dense && moe20);
  EXPECT_NEAR(dense->accounting().tokens() / 68e9, 1.0, 0.01) << dense->accounting().tokens();
  EXPECT_NEAR(double(moe20->accounting().tokens()) / dense->accounting().tokens(), 4.6, 0.15);
  EXPECT_NEAR(moe20->accounting().total_ffn_ratio(), 21.0, 0.5) << "μ ≈ 21";
  // docs/domain.md's closed form R_c = r_a·[1 + 2γ_m/(4+3β)] / [1 + 2γ_d/(4+3α)] (L_d = 0, equal N)
  // against the exact M ratio: the one dense layer and the N rounding cost well under 1%.
  const auto& m = moe20->accounting();
  const auto& d = dense->accounting();
  const double r_c = m.activation_rate() *
                     (1 + 2 * m.sequence_ratio() / (4 + 3 * m.active_ffn_ratio())) /
                     (1 + 2 * d.sequence_ratio() / (4 + 3 * d.ffn_ratio()));
  EXPECT_NEAR(m.flops_per_token() / d.flops_per_token() / r_c, 1.0, 0.01)
      << "M_moe/M_dense = " << m.flops_per_token() / d.flops_per_token() << ", R_c = " << r_c;
  for (const RunSpec& r : runs) {
    EXPECT_LE(std::fabs(double(r.accounting().params()) / dense->accounting().params() - 1), 0.02)
        << r.name() << ": every run must hold the dense model's N within 2%";
  }
}

// A dense-only study over two budgets a factor of two apart, with an IsoFLOP family of sizes.
constexpr char kDenseSpec[] = R"(
name: frontier
dense: {d_model: 128, num_layers: 4, num_heads: 8, ffn_hidden: 384}
training: {learning_rate: 1e-3, batch_tokens: 256, sequence_length: 64}
data: {corpus: kjv}
grid:
  compute: [{name: C1, compute_flops: 1e12}, {name: C2, compute_flops: 2e12}]
  dense_sizes: [{params_multiple: 0.5}, {params_multiple: 1}, {params_multiple: 2},
                {target_params: 300K}, {d_model: 96, num_layers: 2}]
baselines: [{name: dense-1C, compute_multiple: 1}, {name: dense-2C, compute_multiple: 2}]
)";

TEST(PlannerTest, DenseSizeAxisPlansEachSizeAtItsOwnTargetAndItsOwnTokens) {
  const auto runs = MustPlan(Spec(kDenseSpec));
  const RunSpec* dense1 = Find(runs, "dense-1C-C1-unique-s0");
  ASSERT_TRUE(dense1);
  const double dense_n = double(dense1->accounting().params());
  const std::map<std::string, double> targets = {
      {"n0.5", 0.5 * dense_n}, {"n2", 2 * dense_n}, {"n300K", 300e3}};
  int frontier = 0;
  for (const RunSpec& r : runs) {
    if (r.role() != parity::v1::RUN_ROLE_DENSE_FRONTIER) continue;
    ++frontier;
    const std::string size = r.grid_point().at("dense_size");
    const auto& a = r.accounting();
    if (targets.contains(size)) {
      EXPECT_LE(std::fabs(double(a.params()) / targets.at(size) - 1), 0.02)
          << r.name() << ": N " << a.params() << " must be within 2% of ITS target "
          << targets.at(size);
    } else {
      EXPECT_EQ(size, "d96l2");
      EXPECT_EQ(r.model().d_model(), 96u) << "the explicit size keeps its shape";
      EXPECT_EQ(r.model().num_layers(), 2u);
    }
    const double budget = r.compute_budget() == "C1" ? 1e12 : 2e12;
    EXPECT_NEAR(double(a.tokens()), budget / a.flops_per_token(),
                0.5 * double(r.training().batch_tokens()) + 1)
        << r.name() << ": D = C/M with this size's own M";
    EXPECT_EQ(r.model().architecture(), parity::v1::ARCHITECTURE_DENSE);
  }
  EXPECT_EQ(frontier, 4 * 2) << "sizes 0.5, 2, 300K and the explicit one at both budgets; the "
                                "1× size is the dense 1C run";
  bool one_x_served = false;
  for (const auto& g : dense1->also_serves()) {
    one_x_served |= g.role() == parity::v1::RUN_ROLE_DENSE_FRONTIER &&
                    g.grid_point().at("dense_size") == "n1" && g.compute_budget() == "C1";
  }
  EXPECT_TRUE(one_x_served) << "dense 1C at C1 also serves as the frontier's 1× size at C1";
}

// Dense 2C of C1 and dense 1C of C2 = 2·C1 are one run: planned once, named for the first group,
// and the second group finds it in also_serves.
TEST(PlannerTest, RunsIdenticalAcrossBudgetsArePlannedOnceAndServeEveryGroup) {
  SweepSpec spec = Spec(kDenseSpec);
  spec.mutable_grid()->clear_dense_sizes();
  spec.mutable_grid()->add_seeds(0);
  spec.mutable_grid()->add_seeds(1);
  const auto runs = MustPlan(spec);
  EXPECT_EQ(runs.size(), 2u * 2 * 2 - 2) << "2 baselines × 2 budgets × 2 seeds, less 2 shared";
  for (const RunSpec& r : runs) {
    EXPECT_NE(r.name().rfind("dense-1C-C2", 0), 0u) << r.name() << " should have been merged";
  }
  for (const char* name : {"dense-2C-C1-unique-s0", "dense-2C-C1-unique-s1"}) {
    const RunSpec* shared = Find(runs, name);
    ASSERT_TRUE(shared);
    ASSERT_EQ(shared->also_serves_size(), 1) << name;
    const auto& g = shared->also_serves(0);
    EXPECT_EQ(g.compute_budget(), "C2");
    EXPECT_EQ(g.role(), parity::v1::RUN_ROLE_DENSE_BASELINE);
    EXPECT_DOUBLE_EQ(g.compute_multiple(), 1.0);
    EXPECT_EQ(g.grid_point().at("baseline"), "dense-1C");
    EXPECT_EQ(g.grid_point().at("seed"), shared->grid_point().at("seed"));
    EXPECT_EQ(g.name().rfind("dense-1C-C2-unique-s", 0), 0u) << g.name();
  }
  // Different seeds are different runs: never merged.
  EXPECT_NE(RunIdentity(*Find(runs, "dense-2C-C1-unique-s0")),
            RunIdentity(*Find(runs, "dense-2C-C1-unique-s1")));
}

// The 7B paper's Dense-2C: 1.91× the compute on unique data while the MoE arms reuse 68B tokens.
TEST(PlannerTest, BaselineAtAnyMultipleWithItsOwnDataPolicy) {
  SweepSpec spec = Spec();
  auto* baseline = spec.add_baselines();
  baseline->set_compute_multiple(1.91);
  baseline->set_reuse(parity::v1::REUSE_MODE_UNIQUE);
  const auto runs = MustPlan(spec);
  const RunSpec* dense1 = Find(runs, "dense-1C-C1-unique-s0");
  const RunSpec* strong = Find(runs, "dense-1.91C-unique-C1-unique-s0");
  ASSERT_TRUE(dense1 && strong);
  EXPECT_NEAR(double(strong->accounting().tokens()) / double(dense1->accounting().tokens()), 1.91,
              0.01);
  EXPECT_DOUBLE_EQ(strong->accounting().epochs(), 1.0) << "unique data: every token once";
  EXPECT_EQ(strong->accounting().unique_tokens(), strong->accounting().tokens());
  EXPECT_EQ(strong->grid_point().at("baseline_data"), "unique");
  EXPECT_DOUBLE_EQ(strong->compute_multiple(), 1.91);
  // Under the strict and loose variants it is the same unique-data run: planned once, serving
  // each variant's group (whose MoE runs reuse their data).
  std::set<std::string> variants;
  for (const auto& g : strong->also_serves()) variants.insert(g.data_variant());
  EXPECT_EQ(variants, (std::set<std::string>{"strict", "loose4ep"}));
  const RunSpec* strict_moe = Find(runs, "moe-ra30-C1-strict-s0");
  ASSERT_TRUE(strict_moe);
  EXPECT_GT(strict_moe->accounting().epochs(), 1.0) << "while the MoE arm reuses";
}

// r_a moves through E and D_e while K stays where the point pins it (the backbone's granularity
// becomes a preference), so r_a is not confounded with top-K.
TEST(PlannerTest, KPinnedPointsVaryActivationRateAtFixedK) {
  SweepSpec spec = Spec();
  spec.mutable_moe()->mutable_moe()->set_granularity(8);
  spec.mutable_grid()->clear_moe();
  for (double ra : {0.3, 0.4, 0.5}) {
    auto* p = spec.mutable_grid()->add_moe();
    p->set_target_activation_rate(ra);
    p->set_top_k(2);
  }
  const auto runs = MustPlan(spec);
  std::map<std::string, double> ra_of;
  for (const RunSpec& r : runs) {
    if (r.role() != parity::v1::RUN_ROLE_MOE) continue;
    EXPECT_EQ(r.model().moe().top_k(), 2u) << r.name() << ": K is pinned";
    EXPECT_EQ(r.grid_point().at("top_k"), "2") << r.name();
    EXPECT_NEAR(r.accounting().activation_rate(), r.model().moe().target_activation_rate(),
                0.1 * r.model().moe().target_activation_rate())
        << r.name();
    ra_of[r.grid_point().at("moe")] = r.accounting().activation_rate();
  }
  ASSERT_EQ(ra_of.size(), 3u);
  EXPECT_LT(ra_of["ra30-k2"], ra_of["ra40-k2"]);
  EXPECT_LT(ra_of["ra40-k2"], ra_of["ra50-k2"]);
}

TEST(PlannerTest, AblationAxesPlanAndCarryTheirKeys) {
  SweepSpec spec = Spec();
  spec.mutable_grid()->clear_moe();
  auto* base = spec.mutable_grid()->add_moe();
  base->set_target_activation_rate(0.3);
  auto* ablated = spec.mutable_grid()->add_moe();
  ablated->set_target_activation_rate(0.3);
  ablated->set_layout(parity::v1::MOE_LAYOUT_ALL_MOE);
  ablated->set_shared_expert_hidden(64);
  ablated->set_balance(parity::v1::BALANCE_METHOD_LOSS_FREE);
  const auto runs = MustPlan(spec);
  const RunSpec* plain = Find(runs, "moe-ra30-C1-unique-s0");
  const RunSpec* variant = Find(runs, "moe-ra30-allmoe-se64-lossfree-C1-unique-s0");
  ASSERT_TRUE(plain && variant);
  EXPECT_EQ(variant->model().moe().layout(), parity::v1::MOE_LAYOUT_ALL_MOE);
  EXPECT_EQ(variant->model().moe().shared_expert_hidden(), 64u);
  EXPECT_EQ(variant->model().moe().router().balance(), parity::v1::BALANCE_METHOD_LOSS_FREE);
  // Loss-free balancing replaces the aux loss: the planned run must not carry the aux-loss
  // default, and gets the bias update rate it needs (the plain point the reverse).
  EXPECT_EQ(variant->model().moe().router().aux_loss_coef(), 0.0) << "no aux loss with loss_free";
  EXPECT_GT(variant->model().moe().router().bias_update_rate(), 0.0);
  EXPECT_EQ(plain->model().moe().router().aux_loss_coef(), 0.01);
  EXPECT_EQ(variant->grid_point().at("layout"), "all-moe");
  EXPECT_EQ(variant->grid_point().at("shared_expert_hidden"), "64");
  EXPECT_EQ(variant->grid_point().at("balance"), "loss_free");
  EXPECT_FALSE(plain->grid_point().contains("layout")) << "only the keys a point sets";
  EXPECT_LE(std::fabs(double(variant->accounting().params()) / plain->model().target_params() - 1),
            0.02)
      << "an ablation changes the shape, never the target N";
}

TEST(PlannerTest, UndertrainedDenseBaselineWarnsAndAllowUndertrainedSilencesIt) {
  SweepSpec spec = Spec();
  std::vector<RunSpec> runs = MustPlan(spec);
  std::vector<FieldViolation> warnings = PlanWarnings(spec, runs);
  const FieldViolation* regime = nullptr;
  for (const auto& w : warnings) {
    if (w.field == "grid.compute[0]") regime = &w;
  }
  ASSERT_NE(regime, nullptr) << "dense 1C at 1e11 FLOPs is far below 20 tokens per parameter";
  EXPECT_NE(regime->description.find("dense 1C at C1 trains"), std::string::npos)
      << regime->description;
  EXPECT_NE(regime->description.find("tokens per parameter (< 20, the papers' regime)"),
            std::string::npos)
      << regime->description;
  EXPECT_NE(regime->description.find("allow_undertrained: true"), std::string::npos);
  spec.set_allow_undertrained(true);
  for (const auto& w : PlanWarnings(spec, MustPlan(spec))) {
    EXPECT_NE(w.field, "grid.compute[0]") << "allow_undertrained silences it: " << w.description;
  }
  // In the regime: a budget where dense 1C sees ≥ 20 tokens per parameter does not warn.
  spec.set_allow_undertrained(false);
  const RunSpec* dense1 = Find(runs, "dense-1C-C1-unique-s0");
  ASSERT_TRUE(dense1);
  spec.mutable_grid()->mutable_compute(0)->set_compute_flops(
      25.0 * double(dense1->accounting().params()) * dense1->accounting().flops_per_token());
  for (const auto& w : PlanWarnings(spec, MustPlan(spec))) {
    EXPECT_NE(w.field, "grid.compute[0]") << "25 tokens per parameter is in the regime";
  }
}

TEST(PlannerTest, TopKOfOneOrAboveSixteenWarnsNamingThePoint) {
  SweepSpec spec = Spec();
  spec.set_allow_undertrained(true);
  spec.mutable_grid()->clear_moe();
  for (uint32_t k : {1u, 2u}) {
    auto* p = spec.mutable_grid()->add_moe();
    p->set_name(absl::StrCat("k", k));
    p->set_target_activation_rate(0.3);
    p->set_top_k(k);
  }
  const std::vector<FieldViolation> warnings = PlanWarnings(spec, MustPlan(spec));
  ASSERT_EQ(warnings.size(), 1u) << "only the K = 1 point warns";
  EXPECT_EQ(warnings[0].field, "grid.moe[0]");
  EXPECT_NE(warnings[0].description.find("k1 routes each token to K = 1"), std::string::npos)
      << warnings[0].description;
  // K > 16: the published 7B grid's r_a 53% point solves to K = 22.
  absl::StatusOr<SweepSpec> seven_b = LoadSweepSpecFile("examples/equal_resources_7b.yaml");
  ASSERT_TRUE(seven_b.ok());
  bool above = false;
  for (const auto& w : PlanWarnings(*seven_b, MustPlan(*seven_b))) {
    above |= w.field == "grid.moe[7]" && w.description.find("K = 22") != std::string::npos;
  }
  EXPECT_TRUE(above) << "expected a K > 16 warning naming grid.moe[7] (ra53, K = 22)";
}

// The examples a researcher starts from are in the papers' regime or say why not.
TEST(PlannerTest, ExamplesAreInTheRegimeOrAllowUndertrained) {
  for (const char* path :
       {"examples/full_study_2b.yaml", "examples/published_2b.yaml", "examples/micro.yaml",
        "examples/cpu_study.yaml", "examples/equal_resources_7b.yaml"}) {
    absl::StatusOr<SweepSpec> spec = LoadSweepSpecFile(path);
    ASSERT_TRUE(spec.ok()) << path;
    for (const auto& w : PlanWarnings(*spec, MustPlan(*spec))) {
      EXPECT_EQ(w.field.rfind("grid.compute", 0), std::string::npos)
          << path << ": " << w.field << ": " << w.description;
    }
  }
  absl::StatusOr<SweepSpec> cpu = LoadSweepSpecFile("examples/cpu_study.yaml");
  ASSERT_TRUE(cpu.ok());
  EXPECT_TRUE(PlanWarnings(*cpu, MustPlan(*cpu)).empty())
      << "the CPU study holds K = 2 at every point: no top-K warning";
}

}  // namespace
}  // namespace parity::core
