// Rendering planned runs for `parity plan`: an aligned table with human units, CSV with full
// precision, or the RunSpec list as proto JSON.
#pragma once

#include <string>
#include <vector>

#include "parity/v1/sweep.pb.h"

namespace parity::cli {

enum class PlanFormat { kTable, kCsv, kJson };

std::string FormatPlan(const std::vector<parity::v1::RunSpec>& runs, PlanFormat format);

}  // namespace parity::cli
