// The defaults a RunSpec's unset fields take (core/run_spec_defaults.h), which the planner and the
// engine's adapter both apply: the warmup rule at the step counts where rounding and the clip and
// cap meet, a set field kept, filling twice the same as once, and the router's per balance.
#include "core/run_spec_defaults.h"

#include <google/protobuf/util/message_differencer.h>

#include <cstdint>

#include "core/spec_defaults.h"
#include "gtest/gtest.h"

namespace parity::core {
namespace {

using google::protobuf::util::MessageDifferencer;
using parity::v1::TrainingSpec;

struct WarmupCase {
  uint64_t steps;
  uint64_t warmup;
  const char* why;
};

// round(1% of steps) clipped to [200, 2000], then at most floor(10% of steps).
TEST(RunSpecDefaultsTest, WarmupRuleAtAwkwardStepCounts) {
  const WarmupCase cases[] = {
      {0, 0, "no steps, no warmup"},
      {1, 0, "10% of one step floors to 0"},
      {9, 0, "10% of 9 floors to 0"},
      {10, 1, "10% cap"},
      {150, 15, "10% cap"},
      {249, 24, "10% cap floors 24.9"},
      {250, 25, "10% cap"},
      {1999, 199, "10% cap floors 199.9"},
      {2000, 200, "the cap meets the 200 floor"},
      {2001, 200, "clipped at 200"},
      {19949, 200, "1% = 199.49 rounds to 199, clipped up to 200"},
      {20049, 200, "1% = 200.49 rounds down"},
      {20050, 201, "1% = 200.5 rounds half away from zero (steps/100 would give 200)"},
      {20150, 202, "1% = 201.5 rounds up (steps/100 would give 201)"},
      {20199, 202, "1% = 201.99 rounds up (steps/100 would give 201)"},
      {100000, 1000, "1% of steps"},
      {199949, 1999, "1% = 1999.49 rounds down"},
      {199950, 2000, "1% = 1999.5 rounds up to the 2000 ceiling"},
      {500000, 2000, "clipped at 2000"},
  };
  for (const WarmupCase& c : cases) {
    EXPECT_EQ(DefaultWarmupSteps(c.steps), c.warmup) << c.steps << " steps: " << c.why;
    TrainingSpec t;
    t.set_steps(c.steps);
    FillTrainingDefaults(t);
    EXPECT_EQ(t.warmup_steps(), c.warmup) << c.steps << " steps, filled: " << c.why;
  }
}

TEST(RunSpecDefaultsTest, WarmupStepsThenFractionThenTheRule) {
  TrainingSpec t;
  t.set_steps(150);
  t.set_warmup_fraction(0.05);  // 7.5 rounds to 8
  EXPECT_EQ(WarmupStepsOf(t), 8u);
  t.set_warmup_steps(3);
  EXPECT_EQ(WarmupStepsOf(t), 3u) << "warmup_steps wins over the fraction";
  t.clear_warmup_steps();
  t.set_warmup_fraction(0.001);  // 0.15 rounds to 0: the fraction asked for no warmup
  EXPECT_EQ(WarmupStepsOf(t), 0u);
  t.clear_warmup_fraction();
  EXPECT_EQ(WarmupStepsOf(t), 15u) << "neither set: the rule";
}

TEST(RunSpecDefaultsTest, UnsetTrainingFieldsTakeTheReferenceDefaults) {
  TrainingSpec t;
  t.set_steps(1001);
  FillTrainingDefaults(t);
  EXPECT_EQ(t.warmup_steps(), 100u);
  EXPECT_EQ(t.schedule(), parity::v1::LR_SCHEDULE_COSINE);
  EXPECT_EQ(t.decay_fraction(), kDefaultDecayFraction);
  EXPECT_EQ(t.min_lr_ratio(), kDefaultMinLrRatio);
  EXPECT_EQ(t.adam_beta1(), kDefaultAdamBeta1);
  EXPECT_EQ(t.adam_beta2(), kDefaultAdamBeta2);
  EXPECT_EQ(t.adam_epsilon(), kDefaultAdamEpsilon);
  EXPECT_EQ(t.weight_decay(), kDefaultWeightDecay);
  EXPECT_EQ(t.grad_clip(), kDefaultGradClip);
  EXPECT_EQ(t.log_every_steps(), kDefaultLogEverySteps);
  EXPECT_EQ(t.eval_every_steps(), kDefaultEvalEverySteps);
  EXPECT_EQ(t.eval_tokens(), kDefaultEvalTokens);
  EXPECT_EQ(t.checkpoint_every_steps(), 51u) << "ceil(1001 / 20)";
  EXPECT_EQ(t.checkpoint_every_seconds(), kDefaultCheckpointEverySeconds);
  const TrainingSpec once = t;
  FillTrainingDefaults(t);
  EXPECT_TRUE(MessageDifferencer::Equals(once, t)) << "filling twice changed " << t.DebugString();
}

// Every field with a default set to something else, zeros included where the field tells an
// explicit 0 from unset: nothing is overwritten.
TEST(RunSpecDefaultsTest, SetTrainingFieldsAreKept) {
  TrainingSpec t;
  t.set_steps(20050);
  t.set_warmup_steps(7);
  t.set_schedule(parity::v1::LR_SCHEDULE_WSD);
  t.set_decay_fraction(0.3);
  t.set_min_lr_ratio(0);
  t.set_adam_beta1(0.8);
  t.set_adam_beta2(0.9);
  t.set_adam_epsilon(1e-6);
  t.set_weight_decay(0);
  t.set_grad_clip(0);
  t.set_log_every_steps(3);
  t.set_eval_every_steps(7);
  t.set_eval_tokens(1024);
  t.set_checkpoint_every_steps(0);
  t.set_checkpoint_every_seconds(0);
  const TrainingSpec given = t;
  FillTrainingDefaults(t);
  EXPECT_TRUE(MessageDifferencer::Equals(given, t)) << "a set field changed: " << t.DebugString();
}

struct RouterCase {
  parity::v1::BalanceMethod balance;
  parity::v1::BalanceMethod filled;
  double aux, z;
  bool has_bias;
};

TEST(RunSpecDefaultsTest, RouterCoefficientsFollowTheBalance) {
  const RouterCase cases[] = {
      {parity::v1::BALANCE_METHOD_UNSPECIFIED, parity::v1::BALANCE_METHOD_AUX_LOSS,
       kDefaultAuxLossCoef, kDefaultZLossCoef, false},
      {parity::v1::BALANCE_METHOD_AUX_LOSS, parity::v1::BALANCE_METHOD_AUX_LOSS,
       kDefaultAuxLossCoef, kDefaultZLossCoef, false},
      {parity::v1::BALANCE_METHOD_LOSS_FREE, parity::v1::BALANCE_METHOD_LOSS_FREE, 0,
       kDefaultZLossCoef, true},
      {parity::v1::BALANCE_METHOD_NONE, parity::v1::BALANCE_METHOD_NONE, 0, 0, false},
  };
  for (const RouterCase& c : cases) {
    parity::v1::RouterSpec r;
    r.set_balance(c.balance);
    FillRouterDefaults(r);
    const std::string name = parity::v1::BalanceMethod_Name(c.balance);
    EXPECT_EQ(r.balance(), c.filled) << name;
    EXPECT_EQ(r.aux_loss_coef(), c.aux) << name;
    EXPECT_EQ(r.z_loss_coef(), c.z) << name;
    EXPECT_EQ(r.has_bias_update_rate(), c.has_bias) << name;
    if (c.has_bias) {
      EXPECT_EQ(r.bias_update_rate(), kDefaultBiasUpdateRate) << name;
    }
  }
  parity::v1::RouterSpec r;
  r.set_balance(parity::v1::BALANCE_METHOD_NONE);
  r.set_aux_loss_coef(0.02);
  r.set_z_loss_coef(0.003);
  FillRouterDefaults(r);
  EXPECT_EQ(r.aux_loss_coef(), 0.02) << "a set coefficient is kept whatever the balance";
  EXPECT_EQ(r.z_loss_coef(), 0.003);
}

TEST(RunSpecDefaultsTest, ModelAndDataDefaults) {
  parity::v1::ModelSpec m;
  m.set_architecture(parity::v1::ARCHITECTURE_MOE);
  m.set_num_heads(4);
  FillModelDefaults(m);
  EXPECT_EQ(m.vocab_size(), kDefaultVocabSize);
  EXPECT_EQ(m.rope_theta(), kDefaultRopeTheta);
  EXPECT_EQ(m.init_std(), kDefaultInitStd);
  EXPECT_EQ(m.norm_eps(), kDefaultNormEps);
  EXPECT_EQ(m.position_encoding(), parity::v1::POSITION_ENCODING_ROTARY);
  EXPECT_EQ(m.num_kv_heads(), 4u) << "multi-head unless told";
  EXPECT_EQ(m.moe().router().aux_loss_coef(), kDefaultAuxLossCoef) << "an MoE's router too";
  parity::v1::ModelSpec dense;
  dense.set_architecture(parity::v1::ARCHITECTURE_DENSE);
  FillModelDefaults(dense);
  EXPECT_FALSE(dense.has_moe()) << "a dense model grows no MoE part";
  parity::v1::DataSpec d;
  FillDataDefaults(d);
  EXPECT_EQ(d.validation_fraction(), kDefaultValidationFraction);
}

}  // namespace
}  // namespace parity::core
