#include "core/analysis_eval_sets.h"

#include <algorithm>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/eval_sets.h"

namespace parity::core {

std::optional<double> FinalBpcOnSet(const v1::RunSummary& summary, absl::string_view set) {
  if (set.empty()) return summary.final_val_bpc();
  if (auto it = summary.final_eval_bpc().find(std::string(set));
      it != summary.final_eval_bpc().end()) {
    return it->second;
  }
  if (set == kPrimaryEvalSet && summary.final_eval_bpc().empty()) return summary.final_val_bpc();
  return std::nullopt;
}

std::vector<std::string> EvalSetsOf(const std::vector<v1::Run>& runs) {
  std::set<std::string> reported;
  for (const v1::Run& run : runs) {
    for (const auto& [name, bpc] : run.summary().final_eval_bpc()) reported.insert(name);
  }
  if (reported.empty()) return {std::string(kPrimaryEvalSet)};
  std::vector<std::string> ordered;
  for (const v1::Run& run : runs) {
    for (const std::string& name : run.spec().data().eval_sets()) {
      if (reported.erase(name) > 0) ordered.push_back(name);
    }
  }
  if (reported.erase(std::string(kPrimaryEvalSet)) > 0) {
    ordered.insert(ordered.begin(), std::string(kPrimaryEvalSet));
  }
  ordered.insert(ordered.end(), reported.begin(), reported.end());
  return ordered;
}

absl::StatusOr<RunsOnSet> FinishedRunsOnSet(const std::vector<v1::Run>& runs,
                                            absl::string_view set) {
  RunsOnSet out;
  for (const v1::Run& run : runs) {
    const std::optional<double> bpc = FinalBpcOnSet(run.summary(), set);
    if (!bpc.has_value()) {
      ++out.without_the_set;
      continue;
    }
    out.runs.push_back(
        {.run_id = run.run_id(), .spec = &run.spec(), .val_bpc = *bpc, .memberships = {}});
  }
  if (out.runs.empty() && !runs.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("no finished run reports evaluation set '", set,
                     "'; the runs report: ", absl::StrJoin(EvalSetsOf(runs), ", ")));
  }
  return out;
}

}  // namespace parity::core
