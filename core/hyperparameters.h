// The training half of planning: learning rate and batch from the explicit values or the Step Law,
// steps from the token budget, then warmup and every optimizer default written out
// (run_spec_defaults.h, the same code the engine's adapter fills an unplanned spec with).
#pragma once

#include <cstdint>

#include "absl/status/status.h"
#include "core/run_spec_defaults.h"  // DefaultWarmupSteps, FillTrainingDefaults
#include "parity/v1/training.pb.h"

namespace parity::core {

// η = 1.79·N^-0.713·D^0.307 (N parameters, D tokens).
double StepLawLearningRate(double params, double tokens);

// B = 0.58·D^0.571 tokens, rounded to a multiple of the sequence length (at least one sequence)
// and, for a gang of `ranks` processes, to the nearest multiple of `ranks` sequences (at least
// one a rank): the ranks share each step's batch in whole sequences.
uint64_t StepLawBatchTokens(double tokens, uint32_t sequence_length, uint32_t ranks = 1);

// Completes `training` for a run of `tokens` tokens whose rule-relevant size is `params` (N_a for
// an MoE, which equals N for a dense model): learning_rate, batch_tokens, steps = round(D/B) (at
// least 1), then FillTrainingDefaults (warmup_steps and the optimizer/cadence defaults).
// FailedPrecondition when the explicit rule left a value unset (validation normally catches that
// first). For a gang of `ranks` > 1 (resources.ranks) the Step Law's batch is a multiple of
// `ranks` sequences, and an explicit batch_tokens that is not is InvalidArgument naming
// training.batch_tokens.
absl::Status ResolveTraining(parity::v1::TrainingSpec& training, uint64_t params, uint64_t tokens,
                             uint32_t ranks = 1);

}  // namespace parity::core
