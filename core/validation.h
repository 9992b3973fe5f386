// Validation of a SweepSpec before planning: every problem is collected (not just the first),
// each with the path of the offending field and a reason a researcher can act on, e.g.
//   grid.moe[3].top_k: 9 exceeds num_experts 8
// Problems that only the planner can discover (no integer shape within tolerance) are reported by
// PlanSweep in the same form.
#pragma once

#include <vector>

#include "core/field_violation.h"
#include "parity/v1/sweep.pb.h"

namespace parity::core {

// All violations of `spec`; empty when it can be planned.
std::vector<FieldViolation> ValidateSweepSpec(const parity::v1::SweepSpec& spec);

}  // namespace parity::core
