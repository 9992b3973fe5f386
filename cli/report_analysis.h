// analysis.md of `parity report`: the sweep's analysis as Markdown tables a paper can quote —
// every MoE grid point's frontier EL (the papers') and fixed-N EL, each with its interval and
// extrapolation mark; per group the best grid point, the region with every point's probability
// of being best, the lack-of-fit verdict and a point optimum with its bracket or the reason there
// is none; ΔBPC against every dense baseline with its Welch p; the dense frontier and the fixed-N
// law with their intervals; the joint EL law; the grid points over seeds; every run's fixed-N EL.
// Wording shared with the terminal and runs.csv: cli/report_format.h.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "parity/v1/sweep_service.pb.h"

namespace parity::cli {

// `analysis` unset: a page saying why (`error`).
std::string AnalysisMarkdown(const std::string& sweep_name,
                             const std::optional<parity::v1::AnalyzeSweepResponse>& analysis,
                             const absl::Status& error);

// One section per evaluation set beyond the primary (each response's eval_set names it): the
// optimum and region per group and ΔBPC against every dense baseline on that set. "" for none.
std::string EvalSetsMarkdown(const std::vector<parity::v1::AnalyzeSweepResponse>& other_sets);

// Two lines per group for the terminal: "C1/unique: best grid r_a 25.0% (BPC 1.2345); region
// 15.0% – 40.0%; lack of fit passes (p = 0.430); point optimum 24.1% [15.0% – 40.0%]" (or
// "none: reason"), then the best point's frontier EL and fixed-N EL.
std::string OptimumLines(const parity::v1::AnalyzeSweepResponse& analysis);

}  // namespace parity::cli
