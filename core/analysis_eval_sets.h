// The analysis on another evaluation set: the same AnalyzeFinishedRuns (ΔBPC, the dense laws,
// EL, the optimum and its region) fed each run's final BPC on one named set instead of the
// primary set's final_val_bpc. The selector is the set's name; empty = the primary set. A run
// that did not report the set is left out (and counted), so an analysis on "code" reads only
// runs that were evaluated on "code".
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/analysis.h"
#include "parity/v1/run.pb.h"

namespace parity::core {

// The final BPC of `summary` on `set`: final_eval_bpc[set] when reported; the primary set's
// final_val_bpc when `set` is empty, or is kPrimaryEvalSet and the engine reported no sets.
std::optional<double> FinalBpcOnSet(const v1::RunSummary& summary, absl::string_view set);

// Every set the runs' summaries report, in the order of their specs' DataSpec.eval_sets (the
// primary first), then any other alphabetically; {"validation"} when none reports sets.
std::vector<std::string> EvalSetsOf(const std::vector<v1::Run>& runs);

struct RunsOnSet {
  std::vector<FinishedRun> runs;  // spec pointers into the input runs
  size_t without_the_set = 0;     // runs left out: no BPC on the set
};
// The finished runs as AnalyzeFinishedRuns takes them, each with its final BPC on `set`.
// INVALID_ARGUMENT (naming the set and those reported) when no run reports `set`.
absl::StatusOr<RunsOnSet> FinishedRunsOnSet(const std::vector<v1::Run>& runs,
                                            absl::string_view set);

}  // namespace parity::core
