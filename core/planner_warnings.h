// What a plan does that the researcher should know but that does not stop it. Computed from the
// spec and its planned runs alone, so `parity plan`, PlanSweep and SubmitSweep all give the same
// warnings (the scheduler's planner is injected; these need only its output).
//
//   * the regime: a dense 1C baseline trained on fewer than 20 tokens per parameter (D/N) is
//     undertrained, which favours the MoE (the papers train every model to D/N ≥ 20); silenced by
//     SweepSpec.allow_undertrained for micro studies that are undertrained on purpose;
//   * top-K: an MoE point solved (or pinned) to K = 1 or K > 16, outside the middle range the
//     equal-resource paper recommends;
//   * a redundant grid point: two points of one axis (MoE points, dense sizes, hyperparameter
//     values, data variants for the MoE runs) that plan the identical run at a budget, which the
//     planner trains once (planner_sharing.h); the grid then has fewer distinct points than it
//     appears to.
#pragma once

#include <cstdint>
#include <vector>

#include "core/field_violation.h"
#include "parity/v1/sweep.pb.h"

namespace parity::core {

// D/N below which a dense 1C baseline is undertrained (tokens per parameter).
inline constexpr double kRegimeTokensPerParam = 20.0;
// K above which an MoE point is outside the recommended middle range (count).
inline constexpr uint32_t kMaxRecommendedTopK = 16;

// One warning per offending budget (the lowest D/N of its dense 1C runs) and per offending MoE
// point, in spec order. Runs serving several groups count in each (RunSpec.also_serves).
std::vector<FieldViolation> PlanWarnings(const parity::v1::SweepSpec& spec,
                                         const std::vector<parity::v1::RunSpec>& runs);

}  // namespace parity::core
