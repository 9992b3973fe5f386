// The defaults of run_spec_defaults.h, each from spec_defaults.h's constant.
#include "core/run_spec_defaults.h"

#include <algorithm>
#include <cmath>

#include "core/spec_defaults.h"
#include "core/symbols.h"

namespace parity::core {

using parity::v1::BalanceMethod;

uint64_t DefaultWarmupSteps(uint64_t steps) {
  const auto one_percent = static_cast<uint64_t>(std::llround(kWarmupFraction * double(steps)));
  const uint64_t clipped = std::clamp(one_percent, kWarmupMinSteps, kWarmupMaxSteps);
  // 0.1 as a double is slightly above a tenth, so the product is never below the exact tenth and
  // the cast floors it correctly.
  const auto cap = static_cast<uint64_t>(kWarmupCapFraction * double(steps));
  return std::min(clipped, cap);
}

uint64_t WarmupStepsOf(const parity::v1::TrainingSpec& t) {
  if (t.warmup_steps() > 0) return t.warmup_steps();
  if (t.warmup_fraction() > 0) {
    return static_cast<uint64_t>(std::llround(t.warmup_fraction() * double(t.steps())));
  }
  return DefaultWarmupSteps(t.steps());
}

void FillTrainingDefaults(parity::v1::TrainingSpec& t) {
  t.set_warmup_steps(WarmupStepsOf(t));
  if (t.schedule() == parity::v1::LR_SCHEDULE_UNSPECIFIED) {
    t.set_schedule(parity::v1::LR_SCHEDULE_COSINE);
  }
  // Only WSD reads it, but it is filled for every schedule: the engine's run fingerprint covers
  // it, and a grid over the schedule then differs in the schedule alone.
  if (t.decay_fraction() == 0) t.set_decay_fraction(kDefaultDecayFraction);
  if (!t.has_min_lr_ratio()) t.set_min_lr_ratio(kDefaultMinLrRatio);
  if (!t.has_adam_beta1()) t.set_adam_beta1(kDefaultAdamBeta1);
  if (!t.has_adam_beta2()) t.set_adam_beta2(kDefaultAdamBeta2);
  if (!t.has_adam_epsilon()) t.set_adam_epsilon(kDefaultAdamEpsilon);
  if (!t.has_weight_decay()) t.set_weight_decay(kDefaultWeightDecay);
  if (!t.has_grad_clip()) t.set_grad_clip(kDefaultGradClip);
  if (t.log_every_steps() == 0) t.set_log_every_steps(kDefaultLogEverySteps);
  if (t.eval_every_steps() == 0) t.set_eval_every_steps(kDefaultEvalEverySteps);
  if (t.eval_tokens() == 0) t.set_eval_tokens(kDefaultEvalTokens);
  // A killed run loses at most one interval: a twentieth of the run by steps, and 10 minutes by
  // time (whichever comes first; the engine checks time after each step). 0 stays 0 (by time and
  // at the end only).
  if (!t.has_checkpoint_every_steps()) {
    t.set_checkpoint_every_steps(static_cast<uint32_t>(std::max<uint64_t>(
        1, (t.steps() + kDefaultCheckpointsPerRun - 1) / kDefaultCheckpointsPerRun)));
  }
  if (!t.has_checkpoint_every_seconds()) {
    t.set_checkpoint_every_seconds(kDefaultCheckpointEverySeconds);
  }
}

void FillRouterDefaults(parity::v1::RouterSpec& r) {
  if (r.balance() == parity::v1::BALANCE_METHOD_UNSPECIFIED) {
    r.set_balance(parity::v1::BALANCE_METHOD_AUX_LOSS);
  }
  const BalanceMethod balance = r.balance();
  // "none" is no balancing term at all, and loss-free balancing replaces the aux loss: a default
  // λ there would quietly turn an ablation back into aux-loss balancing.
  if (!r.has_aux_loss_coef()) {
    r.set_aux_loss_coef(balance == parity::v1::BALANCE_METHOD_AUX_LOSS ? kDefaultAuxLossCoef : 0);
  }
  if (!r.has_z_loss_coef()) {
    r.set_z_loss_coef(balance == parity::v1::BALANCE_METHOD_NONE ? 0 : kDefaultZLossCoef);
  }
  if (balance == parity::v1::BALANCE_METHOD_LOSS_FREE && !r.has_bias_update_rate()) {
    r.set_bias_update_rate(kDefaultBiasUpdateRate);
  }
}

void FillModelDefaults(parity::v1::ModelSpec& m) {
  if (m.vocab_size() == 0) m.set_vocab_size(kDefaultVocabSize);
  if (m.rope_theta() == 0) m.set_rope_theta(kDefaultRopeTheta);
  if (m.init_std() == 0) m.set_init_std(kDefaultInitStd);
  if (m.norm_eps() == 0) m.set_norm_eps(kDefaultNormEps);
  if (m.position_encoding() == parity::v1::POSITION_ENCODING_UNSPECIFIED) {
    m.set_position_encoding(parity::v1::POSITION_ENCODING_ROTARY);
  }
  if (m.num_kv_heads() == 0) m.set_num_kv_heads(m.num_heads());
  if (m.architecture() == parity::v1::ARCHITECTURE_MOE) {
    FillRouterDefaults(*m.mutable_moe()->mutable_router());
  }
}

void FillDataDefaults(parity::v1::DataSpec& d) {
  if (d.validation_fraction() == 0) d.set_validation_fraction(kDefaultValidationFraction);
}

void FillResourceDefaults(parity::v1::ResourceRequest& r) {
  if (r.ranks() == 0 && r.gpus() > 1) r.set_ranks(r.gpus());
}

uint32_t RanksOf(const parity::v1::ResourceRequest& r) { return std::max<uint32_t>(1, r.ranks()); }

}  // namespace parity::core
