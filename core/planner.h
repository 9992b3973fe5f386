// The planner: a validated SweepSpec in, one fully resolved RunSpec per grid point out.
//
//   PlanSweep(spec)
//     1. ValidateSweepSpec — any violation → InvalidArgument carrying all of them;
//     2. shapes — the MoE backbone, each MoE point's (E, K, D_e), the dense model, each within the
//        N tolerance (a miss is a violation naming the grid point, never a silent substitute);
//     3. tokens — D = C/M per run (C = M_dense·D for dense_tokens budgets; baselines spend m·C);
//     4. data — unique (D̂ = D), strict (D̂ fixed, default the 1C dense D of the budget), loose
//        (D̂ = D/epochs);
//     5. training — explicit values or the Step Law, steps = ceil(D/B), warmup, defaults;
//     6. accounting and the published EL prediction beside each MoE run.
// Runs come out grouped by budget, then data variant, then model (MoE points in grid order, then
// baselines), then seed, then hyperparameter setting. Names are unique and readable:
// "moe-ra20-C1-unique-s0", "dense-2C-C1-strict68B-s0-lr0.001".
#pragma once

#include <vector>

#include "absl/status/statusor.h"
#include "parity/v1/sweep.pb.h"

namespace parity::core {

absl::StatusOr<std::vector<parity::v1::RunSpec>> PlanSweep(const parity::v1::SweepSpec& spec);

}  // namespace parity::core
