// analysis.md of `parity report`: the sweep's analysis as Markdown tables a paper can quote —
// the dense law with its 90% intervals, each group's optimal r_a with its interval or the reason
// there is none, the joint EL law beside the published coefficients, the grid points over seeds
// (model, N, N_a, r_a, D, D̂, epochs, BPC ± spread, ΔBPC, EL) and every MoE run's EL.
#pragma once

#include <optional>
#include <string>

#include "absl/status/status.h"
#include "parity/v1/sweep_service.pb.h"

namespace parity::cli {

// `analysis` unset: a page saying why (`error`).
std::string AnalysisMarkdown(const std::string& sweep_name,
                             const std::optional<parity::v1::AnalyzeSweepResponse>& analysis,
                             const absl::Status& error);

// One line per group for the terminal: "C1 · unique: optimal r_a 22.1% [18.0% – 27.5%]" or the
// reason there is none.
std::string OptimumLines(const parity::v1::AnalyzeSweepResponse& analysis);

}  // namespace parity::cli
