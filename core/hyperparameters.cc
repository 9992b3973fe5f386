// Hyperparameter resolution. The Step Law is applied to N_a for MoE runs: the rule was fitted on
// dense models where N = N_a, and activated size is what sets a run's per-token update scale.
#include "core/hyperparameters.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "core/run_spec_defaults.h"
#include "core/symbols.h"

namespace parity::core {

using parity::v1::TrainingSpec;

double StepLawLearningRate(double params, double tokens) {
  return kStepLawLrCoef * std::pow(params, kStepLawLrParamsExp) *
         std::pow(tokens, kStepLawLrTokensExp);
}

uint64_t StepLawBatchTokens(double tokens, uint32_t sequence_length, uint32_t ranks) {
  const double batch = kStepLawBatchCoef * std::pow(tokens, kStepLawBatchTokensExp);
  const double sequences = std::max(1.0, std::round(batch / sequence_length));
  const double world = std::max<uint32_t>(1, ranks);
  const double shared = std::max(world, std::round(sequences / world) * world);
  return static_cast<uint64_t>(shared) * sequence_length;
}

absl::Status ResolveTraining(TrainingSpec& t, uint64_t params, uint64_t tokens, uint32_t ranks) {
  if (t.rule() == parity::v1::HYPERPARAMETER_RULE_UNSPECIFIED) {
    t.set_rule(parity::v1::HYPERPARAMETER_RULE_EXPLICIT);
  }
  if (t.rule() == parity::v1::HYPERPARAMETER_RULE_STEP_LAW) {
    if (t.learning_rate() == 0) t.set_learning_rate(StepLawLearningRate(params, tokens));
    if (t.batch_tokens() == 0) {
      t.set_batch_tokens(StepLawBatchTokens(tokens, t.sequence_length(), ranks));
    }
  }
  if (t.learning_rate() <= 0 || t.batch_tokens() == 0 || t.sequence_length() == 0) {
    return absl::FailedPreconditionError(
        "learning_rate, batch_tokens and sequence_length must be set by now");
  }
  const uint64_t sequences = t.batch_tokens() / t.sequence_length();
  if (ranks > 1 && t.batch_tokens() % t.sequence_length() == 0 && sequences % ranks != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("training.batch_tokens: ", t.batch_tokens(), " tokens are ", sequences,
                     " sequences, which do not divide among ", ranks,
                     " ranks (resources.ranks); give a "
                     "multiple of ",
                     uint64_t{ranks} * t.sequence_length(), " tokens, or the Step Law rule"));
  }
  // Whole optimizer steps nearest to the budget: the run then consumes exactly steps·B tokens,
  // which the planner records as D (and C = M·D), off the nominal budget by under half a batch.
  t.set_steps(std::max<uint64_t>(
      1, static_cast<uint64_t>(std::llround(double(tokens) / double(t.batch_tokens())))));
  FillTrainingDefaults(t);
  return absl::OkStatus();
}

}  // namespace parity::core
