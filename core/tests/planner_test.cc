// The planner end to end: shapes within tolerance, compute-matched tokens, data reuse, the Step
// Law, warmup, grid expansion and names, the run-count guard, and every example spec.
#include "core/planner.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <set>

#include "core/field_violation.h"
#include "core/hyperparameters.h"
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
  ASSERT_EQ(runs.size(), (2u + 2u) * 3);
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
  ASSERT_EQ(runs.size(), 4u * 3 * 2 * 2) << "(2 MoE + 2 dense) × 3 data × 2 seeds × 2 lr";
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
  EXPECT_EQ(count("examples/micro.yaml"), 24u);
  EXPECT_EQ(count("examples/full_study_2b.yaml"), 243u);
  EXPECT_EQ(count("examples/equal_resources_7b.yaml"), 20u);
  EXPECT_EQ(count("examples/published_2b.yaml"), 3u);
  EXPECT_EQ(count("examples/cpu_study.yaml"), 42u) << "5 r_a × 2 budgets × 3 seeds + 12 dense";
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

}  // namespace
}  // namespace parity::core
