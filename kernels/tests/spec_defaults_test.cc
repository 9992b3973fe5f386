// The engine's resolved RunConfig agrees with core's defaults (core/run_spec_defaults.h), the ones
// the planner writes into a planned RunSpec: for a spec with every defaulted field unset, one with
// every such field set, the warmup rule at awkward step counts, the router per balance, and every
// run planned from examples/micro.yaml against the same run with its defaulted fields cleared.
// These would have caught the engine's own warmup rule (steps/100 where core rounds 1%).
#include "core/spec_defaults.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "core/planner.h"
#include "core/run_spec_defaults.h"
#include "core/spec_loader.h"
#include "kernels/spec/run_spec_adapter.h"
#include "kernels/train/trainer.h"
#include "parity/v1/sweep.pb.h"

namespace parity::kernels {
namespace {

namespace v1 = parity::v1;

// A valid dense RunSpec that sets only what has no default.
v1::RunSpec Bare(uint64_t steps) {
  v1::RunSpec spec;
  spec.set_name("defaults");
  v1::ModelSpec& m = *spec.mutable_model();
  m.set_architecture(v1::ARCHITECTURE_DENSE);
  m.set_d_model(16);
  m.set_num_layers(2);
  m.set_num_heads(2);
  m.set_ffn_hidden(32);
  v1::TrainingSpec& t = *spec.mutable_training();
  t.set_learning_rate(0.003);
  t.set_batch_tokens(64);
  t.set_sequence_length(16);
  t.set_steps(steps);
  spec.mutable_data()->set_corpus("corpus.txt");
  return spec;
}

RunConfig Engine(const v1::RunSpec& spec) {
  auto parsed = RunConfigFromRunSpec(spec);
  EXPECT_TRUE(parsed.ok()) << parsed.status();
  return parsed.ok() ? parsed->config : RunConfig{};
}

// The engine's config carries exactly the values of `filled`, a spec with no field left unset.
void ExpectConfigIs(const RunConfig& c, const v1::RunSpec& filled) {
  const v1::TrainingSpec& t = filled.training();
  const v1::ModelSpec& m = filled.model();
  EXPECT_EQ(c.optimizer.warmup_steps, static_cast<int64_t>(t.warmup_steps()));
  EXPECT_DOUBLE_EQ(c.optimizer.min_lr, t.min_lr_ratio() * t.learning_rate());
  EXPECT_EQ(c.optimizer.decay_fraction, t.decay_fraction());
  EXPECT_EQ(c.optimizer.beta1, t.adam_beta1());
  EXPECT_EQ(c.optimizer.beta2, t.adam_beta2());
  EXPECT_EQ(c.optimizer.eps, t.adam_epsilon());
  EXPECT_EQ(c.optimizer.weight_decay, t.weight_decay());
  EXPECT_EQ(c.optimizer.grad_clip, t.grad_clip());
  EXPECT_EQ(c.train.log_interval, t.log_every_steps());
  EXPECT_EQ(c.train.eval_interval, t.eval_every_steps());
  EXPECT_EQ(c.train.eval_tokens, static_cast<int64_t>(t.eval_tokens()));
  EXPECT_EQ(c.train.checkpoint_interval, t.checkpoint_every_steps());
  EXPECT_EQ(c.train.checkpoint_seconds, t.checkpoint_every_seconds());
  EXPECT_EQ(c.model.vocab_size, static_cast<int64_t>(m.vocab_size()));
  EXPECT_EQ(c.model.rope_theta, m.rope_theta());
  EXPECT_EQ(c.model.init_std, m.init_std());
  EXPECT_EQ(c.model.n_kv_heads, m.num_kv_heads());
  EXPECT_EQ(c.data.validation_fraction, filled.data().validation_fraction());
}

// steps/100 and round(1%) part at 20,050 steps (200 against 201), where the engine used to differ.
TEST(SpecDefaultsTest, EveryFieldUnsetTakesCoresDefaults) {
  const v1::RunSpec bare = Bare(20050);
  v1::RunSpec filled = bare;
  core::FillModelDefaults(*filled.mutable_model());
  core::FillTrainingDefaults(*filled.mutable_training());
  core::FillDataDefaults(*filled.mutable_data());
  const RunConfig c = Engine(bare);
  ExpectConfigIs(c, filled);
  // And the values themselves, so a change to core's fill cannot pass unseen here either.
  EXPECT_EQ(c.optimizer.warmup_steps, 201) << "round(1% of 20,050) = round(200.5)";
  EXPECT_EQ(c.optimizer.schedule, Schedule::kCosine);
  EXPECT_DOUBLE_EQ(c.optimizer.min_lr, core::kDefaultMinLrRatio * 0.003);
  EXPECT_EQ(c.optimizer.beta1, core::kDefaultAdamBeta1);
  EXPECT_EQ(c.optimizer.weight_decay, core::kDefaultWeightDecay);
  EXPECT_EQ(c.train.eval_tokens, static_cast<int64_t>(core::kDefaultEvalTokens));
  EXPECT_EQ(c.train.checkpoint_interval, 1003) << "ceil(20,050 / 20): a killed run loses ≤ 5%";
  EXPECT_EQ(c.train.checkpoint_seconds, core::kDefaultCheckpointEverySeconds);
  EXPECT_EQ(c.model.vocab_size, kByteVocab);
  EXPECT_EQ(c.model.n_kv_heads, 2);
  EXPECT_EQ(c.model.positions, Positions::kRotary);
  EXPECT_EQ(c.data.validation_fraction, core::kDefaultValidationFraction);
  EXPECT_EQ(RunFingerprint(c, "d", "cpu"), RunFingerprint(Engine(filled), "d", "cpu"))
      << "the bare spec and core's filled spec train differently";
}

TEST(SpecDefaultsTest, EveryFieldSetIsTakenAsGiven) {
  v1::RunSpec spec = Bare(20050);
  v1::TrainingSpec& t = *spec.mutable_training();
  t.set_warmup_steps(7);
  t.set_schedule(v1::LR_SCHEDULE_WSD);
  t.set_decay_fraction(0.3);
  t.set_min_lr_ratio(0);
  t.set_adam_beta1(0.8);
  t.set_adam_beta2(0.9);
  t.set_adam_epsilon(1e-6);
  t.set_weight_decay(0.05);
  t.set_grad_clip(0);
  t.set_log_every_steps(3);
  t.set_eval_every_steps(7);
  t.set_eval_tokens(1024);
  t.set_checkpoint_every_steps(0);
  t.set_checkpoint_every_seconds(0);
  v1::ModelSpec& m = *spec.mutable_model();
  m.set_vocab_size(512);
  m.set_rope_theta(500000);
  m.set_init_std(0.01);
  m.set_norm_eps(1e-5);
  m.set_num_kv_heads(1);
  m.set_position_encoding(v1::POSITION_ENCODING_ALIBI);
  spec.mutable_data()->set_validation_fraction(0.2);
  v1::RunSpec filled = spec;
  core::FillModelDefaults(*filled.mutable_model());
  core::FillTrainingDefaults(*filled.mutable_training());
  core::FillDataDefaults(*filled.mutable_data());
  ASSERT_EQ(filled.SerializeAsString(), spec.SerializeAsString()) << "core overwrote a set field";
  const RunConfig c = Engine(spec);
  ExpectConfigIs(c, spec);
  EXPECT_EQ(c.optimizer.schedule, Schedule::kWarmupStableDecay);
  EXPECT_EQ(c.optimizer.min_lr, 0.0) << "an explicit 0 floor is not the default";
  EXPECT_EQ(c.train.checkpoint_interval, 0) << "an explicit 0: by time and at the end only";
  EXPECT_EQ(c.model.positions, Positions::kAlibi);
}

TEST(SpecDefaultsTest, EngineWarmupIsCoresRuleAtAwkwardStepCounts) {
  const std::pair<uint64_t, int64_t> cases[] = {
      {1, 0},       {150, 15},    {249, 24},    {250, 25},      {20049, 200},
      {20050, 201}, {20150, 202}, {20199, 202}, {199950, 2000}, {500000, 2000}};
  for (const auto& [steps, warmup] : cases) {
    const RunConfig c = Engine(Bare(steps));
    EXPECT_EQ(c.optimizer.warmup_steps, warmup) << steps << " steps";
    EXPECT_EQ(c.optimizer.warmup_steps, static_cast<int64_t>(core::DefaultWarmupSteps(steps)))
        << steps << " steps: the engine's warmup is not core's";
  }
  v1::RunSpec fraction = Bare(150);
  fraction.mutable_training()->set_warmup_fraction(0.05);
  EXPECT_EQ(Engine(fraction).optimizer.warmup_steps, 8) << "round(0.05 · 150)";
}

// Unset coefficients follow the balance on both sides: no aux loss unless aux_loss balances, no
// z-loss with none, u only for loss-free.
TEST(SpecDefaultsTest, RouterCoefficientsAreCoresPerBalance) {
  struct Case {
    v1::BalanceMethod balance;
    double aux, z, u;
  };
  const Case cases[] = {
      {v1::BALANCE_METHOD_UNSPECIFIED, core::kDefaultAuxLossCoef, core::kDefaultZLossCoef, 0},
      {v1::BALANCE_METHOD_AUX_LOSS, core::kDefaultAuxLossCoef, core::kDefaultZLossCoef, 0},
      {v1::BALANCE_METHOD_LOSS_FREE, 0, core::kDefaultZLossCoef, core::kDefaultBiasUpdateRate},
      {v1::BALANCE_METHOD_NONE, 0, 0, 0}};
  for (const Case& k : cases) {
    v1::RunSpec spec = Bare(100);
    v1::ModelSpec& m = *spec.mutable_model();
    m.set_architecture(v1::ARCHITECTURE_MOE);
    m.mutable_moe()->set_layout(v1::MOE_LAYOUT_ALL_MOE);
    m.mutable_moe()->set_num_experts(4);
    m.mutable_moe()->set_top_k(2);
    m.mutable_moe()->set_expert_hidden(8);
    m.mutable_moe()->mutable_router()->set_balance(k.balance);
    const RunConfig c = Engine(spec);
    const std::string name = v1::BalanceMethod_Name(k.balance);
    EXPECT_EQ(c.model.aux_loss_weight, k.aux) << name;
    EXPECT_EQ(c.model.z_loss_weight, k.z) << name;
    EXPECT_EQ(c.model.bias_update_rate, k.u) << name;
  }
}

// Clears every field that has a default, leaving what the planner solved (shapes, η, B, steps).
v1::RunSpec WithDefaultsCleared(v1::RunSpec spec) {
  v1::TrainingSpec& t = *spec.mutable_training();
  t.set_warmup_steps(0);
  t.set_warmup_fraction(0);
  t.set_schedule(v1::LR_SCHEDULE_UNSPECIFIED);
  t.set_decay_fraction(0);
  t.clear_min_lr_ratio();
  t.clear_adam_beta1();
  t.clear_adam_beta2();
  t.clear_adam_epsilon();
  t.clear_weight_decay();
  t.clear_grad_clip();
  t.set_log_every_steps(0);
  t.set_eval_every_steps(0);
  t.set_eval_tokens(0);
  t.clear_checkpoint_every_steps();
  t.clear_checkpoint_every_seconds();
  v1::ModelSpec& m = *spec.mutable_model();
  m.set_vocab_size(0);
  m.set_rope_theta(0);
  m.set_init_std(0);
  m.set_norm_eps(0);
  m.set_position_encoding(v1::POSITION_ENCODING_UNSPECIFIED);
  if (m.has_moe()) {
    v1::RouterSpec& r = *m.mutable_moe()->mutable_router();
    r.clear_aux_loss_coef();
    r.clear_z_loss_coef();
    r.clear_bias_update_rate();
  }
  spec.mutable_data()->set_validation_fraction(0);
  return spec;
}

// A planned run names every default; the engine given the same run with them all cleared must
// train it identically. The sweep's own training cadence is cleared first so the planner fills
// every default too, and each balance is planned in turn.
TEST(SpecDefaultsTest, PlannedRunsTrainAsTheirDefaultedSelves) {
  auto loaded = core::LoadSweepSpecFile("examples/micro.yaml");
  ASSERT_TRUE(loaded.ok()) << loaded.status() << " (tests run from the source root)";
  v1::SweepSpec sweep = *loaded;
  v1::TrainingSpec& t = *sweep.mutable_training();
  t.set_schedule(v1::LR_SCHEDULE_UNSPECIFIED);
  t.set_log_every_steps(0);
  t.set_eval_every_steps(0);
  t.set_eval_tokens(0);
  sweep.mutable_data()->set_validation_fraction(0);
  int moe_runs = 0;
  for (const v1::BalanceMethod balance :
       {v1::BALANCE_METHOD_AUX_LOSS, v1::BALANCE_METHOD_LOSS_FREE, v1::BALANCE_METHOD_NONE}) {
    sweep.mutable_moe()->mutable_moe()->mutable_router()->set_balance(balance);
    auto runs = core::PlanSweep(sweep);
    ASSERT_TRUE(runs.ok()) << runs.status();
    for (const v1::RunSpec& run : *runs) {
      const std::string what = v1::BalanceMethod_Name(balance) + " / " + run.name();
      const RunConfig planned = Engine(run);
      const RunConfig cleared = Engine(WithDefaultsCleared(run));
      EXPECT_EQ(RunFingerprint(planned, "d", "cpu"), RunFingerprint(cleared, "d", "cpu")) << what;
      ExpectConfigIs(cleared, run);
      moe_runs += run.model().architecture() == v1::ARCHITECTURE_MOE ? 1 : 0;
    }
  }
  EXPECT_GT(moe_runs, 0) << "micro.yaml should plan MoE runs";
}

}  // namespace
}  // namespace parity::kernels
