// One optimizer step (internal to train/): micro-batches of forward + backward summed into one
// gradient, global-norm clipping folded into AdamW, then loss-free bias balancing; and the
// validation pass. All arithmetic runs as ops on the session's device.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/train/session.h"

namespace parity::kernels {

inline constexpr double kLn2 = 0.6931471805599453;  // nats per bit

struct StepResult {
  double ce = 0, aux = 0, z = 0;  // means over the step's micro-batches (nats; summed over layers)
  int64_t target_bytes = 0;       // bytes of text the step's targets cover (BPC's divisor)
  double grad_norm = 0;           // before clipping
  double learning_rate = 0;
  std::vector<std::vector<int64_t>> loads;  // [MoE layer][E] slots per expert, summed over the step
  double model_flops = 0;                   // counted kModel FLOPs of the step
  double total_flops = 0;                   // all counted FLOPs of the step
  double seconds = 0;
  double data_wait_seconds = 0;  // of `seconds`, waiting for batches (BatchLoader::Next)
  double comm_seconds = 0;  // of `seconds`, in the gang's collectives (incl. waiting for peers)
  bool stop = false;        // some rank of the gang was asked to stop (agreed at this step)
  std::optional<StepProfile> profile;  // this rank's time split, at TrainerOptions::profile_step

  double TrainBpc(int64_t step_tokens) const { return BitsPerByte(ce, step_tokens, target_bytes); }
};

// Trains step session.step + 1 and advances step and cursor. In a gang this rank trains its
// micro-batches and the gradient and statistics are summed over the ranks, so every rank applies
// the same update and the result describes the whole step; `stop` (this rank was asked to stop)
// is or-ed into StepResult::stop. OutOfRange when the loss or the gradient is not finite; then
// nothing is applied. InvalidArgument when the dataset holds a bad id; Unavailable or
// DeadlineExceeded when the gang broke (communicator.h).
absl::StatusOr<StepResult> TrainStep(Session& session, bool stop = false);

// Loss-free balancing (docs/domain.md): b_i += u·sign(mean load − load_i) per MoE layer, on the
// device from the step's summed loads. No-op when the rate is 0.
void BalanceExperts(Session& session, const std::vector<std::vector<int64_t>>& loads);

// BPC (bits per byte of text) of every reported evaluation set, in the corpus's report order,
// each on its fixed first eval_tokens (whole windows from the set's start). InvalidArgument on a
// bad id.
absl::StatusOr<std::vector<double>> Evaluate(Session& session);

}  // namespace parity::kernels
