// Hyperparameter resolution. The Step Law is applied to N_a for MoE runs: the rule was fitted on
// dense models where N = N_a, and activated size is what sets a run's per-token update scale.
#include "core/hyperparameters.h"

#include <algorithm>
#include <cmath>

#include "core/spec_defaults.h"
#include "core/symbols.h"

namespace parity::core {

using parity::v1::TrainingSpec;

double StepLawLearningRate(double params, double tokens) {
  return kStepLawLrCoef * std::pow(params, kStepLawLrParamsExp) *
         std::pow(tokens, kStepLawLrTokensExp);
}

uint64_t StepLawBatchTokens(double tokens, uint32_t sequence_length) {
  const double batch = kStepLawBatchCoef * std::pow(tokens, kStepLawBatchTokensExp);
  const double sequences = std::max(1.0, std::round(batch / sequence_length));
  return static_cast<uint64_t>(sequences) * sequence_length;
}

uint64_t DefaultWarmupSteps(uint64_t steps) {
  const auto one_percent = static_cast<uint64_t>(std::llround(kWarmupFraction * double(steps)));
  const uint64_t clipped = std::clamp(one_percent, kWarmupMinSteps, kWarmupMaxSteps);
  const auto cap = static_cast<uint64_t>(kWarmupCapFraction * double(steps));
  return std::min(clipped, cap);
}

absl::Status ResolveTraining(TrainingSpec& t, uint64_t params, uint64_t tokens) {
  if (t.rule() == parity::v1::HYPERPARAMETER_RULE_UNSPECIFIED) {
    t.set_rule(parity::v1::HYPERPARAMETER_RULE_EXPLICIT);
  }
  if (t.rule() == parity::v1::HYPERPARAMETER_RULE_STEP_LAW) {
    if (t.learning_rate() == 0) t.set_learning_rate(StepLawLearningRate(params, tokens));
    if (t.batch_tokens() == 0) t.set_batch_tokens(StepLawBatchTokens(tokens, t.sequence_length()));
  }
  if (t.learning_rate() <= 0 || t.batch_tokens() == 0 || t.sequence_length() == 0) {
    return absl::FailedPreconditionError(
        "learning_rate, batch_tokens and sequence_length must be set by now");
  }
  // Whole optimizer steps nearest to the budget: the run then consumes exactly steps·B tokens,
  // which the planner records as D (and C = M·D), off the nominal budget by under half a batch.
  t.set_steps(std::max<uint64_t>(
      1, static_cast<uint64_t>(std::llround(double(tokens) / double(t.batch_tokens())))));
  if (t.warmup_steps() == 0) {
    t.set_warmup_steps(t.warmup_fraction() > 0
                           ? static_cast<uint64_t>(std::llround(t.warmup_fraction() * t.steps()))
                           : DefaultWarmupSteps(t.steps()));
  }
  if (t.schedule() == parity::v1::LR_SCHEDULE_UNSPECIFIED) {
    t.set_schedule(parity::v1::LR_SCHEDULE_COSINE);
  }
  if (t.schedule() == parity::v1::LR_SCHEDULE_WSD && t.decay_fraction() == 0) {
    t.set_decay_fraction(kDefaultDecayFraction);
  }
  if (!t.has_min_lr_ratio()) t.set_min_lr_ratio(kDefaultMinLrRatio);
  if (!t.has_adam_beta1()) t.set_adam_beta1(kDefaultAdamBeta1);
  if (!t.has_adam_beta2()) t.set_adam_beta2(kDefaultAdamBeta2);
  if (!t.has_adam_epsilon()) t.set_adam_epsilon(kDefaultAdamEpsilon);
  if (!t.has_weight_decay()) t.set_weight_decay(kDefaultWeightDecay);
  if (!t.has_grad_clip()) t.set_grad_clip(kDefaultGradClip);
  if (t.log_every_steps() == 0) t.set_log_every_steps(kDefaultLogEverySteps);
  if (t.eval_every_steps() == 0) t.set_eval_every_steps(kDefaultEvalEverySteps);
  if (t.eval_tokens() == 0) t.set_eval_tokens(kDefaultEvalTokens);
  // A killed run loses at most one interval: 5% of the run by steps, and 10 minutes by time
  // (whichever comes first; the engine checks time after each step).
  if (!t.has_checkpoint_every_steps()) {
    t.set_checkpoint_every_steps(static_cast<uint32_t>(std::max<uint64_t>(
        1, (t.steps() + kDefaultCheckpointsPerRun - 1) / kDefaultCheckpointsPerRun)));
  }
  if (!t.has_checkpoint_every_seconds())
    t.set_checkpoint_every_seconds(kDefaultCheckpointEverySeconds);
  return absl::OkStatus();
}

}  // namespace parity::core
