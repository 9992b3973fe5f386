// The training half of planning: learning rate and batch from the explicit values or the Step Law,
// steps from the token budget, warmup, and every optimizer default written out so the engine
// never has to guess one.
#pragma once

#include <cstdint>

#include "absl/status/status.h"
#include "parity/v1/training.pb.h"

namespace parity::core {

// η = 1.79·N^-0.713·D^0.307 (N parameters, D tokens).
double StepLawLearningRate(double params, double tokens);

// B = 0.58·D^0.571 tokens, rounded to a multiple of the sequence length (at least one sequence).
uint64_t StepLawBatchTokens(double tokens, uint32_t sequence_length);

// clip(1% of steps, 200, 2000), capped at 10% of the steps for short runs.
uint64_t DefaultWarmupSteps(uint64_t steps);

// Completes `training` for a run of `tokens` tokens whose rule-relevant size is `params` (N_a for
// an MoE, which equals N for a dense model): learning_rate, batch_tokens, steps = ceil(D/B),
// warmup_steps and the optimizer/cadence defaults. FailedPrecondition when the explicit rule left
// a value unset (validation normally catches that first).
absl::Status ResolveTraining(parity::v1::TrainingSpec& training, uint64_t params, uint64_t tokens);

}  // namespace parity::core
