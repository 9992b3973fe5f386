#include "core/planner_warnings.h"

#include <limits>
#include <map>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/grid.h"
#include "core/planner_sharing.h"

namespace parity::core {
namespace {

using parity::v1::RunSpec;
using parity::v1::SweepSpec;

// The lowest D/N of the dense 1C runs of each budget label.
std::map<std::string, double> DenseOneCTokensPerParam(const std::vector<RunSpec>& runs) {
  std::map<std::string, double> lowest;
  for (const RunSpec& run : runs) {
    if (run.accounting().params() == 0) continue;
    const double per_param = double(run.accounting().tokens()) / double(run.accounting().params());
    for (const parity::v1::GroupRef& group : GroupsOf(run)) {
      if (group.role() != parity::v1::RUN_ROLE_DENSE_BASELINE || group.compute_multiple() != 1) {
        continue;
      }
      auto [it, inserted] = lowest.emplace(group.compute_budget(), per_param);
      if (!inserted && per_param < it->second) it->second = per_param;
    }
  }
  return lowest;
}

// The solved K of each MoE point label.
std::map<std::string, uint32_t> TopKByPoint(const std::vector<RunSpec>& runs) {
  std::map<std::string, uint32_t> top_k;
  for (const RunSpec& run : runs) {
    for (const parity::v1::GroupRef& group : GroupsOf(run)) {
      if (group.role() != parity::v1::RUN_ROLE_MOE) continue;
      auto label = group.grid_point().find("moe");
      if (label != group.grid_point().end())
        top_k.emplace(label->second, run.model().moe().top_k());
    }
  }
  return top_k;
}

}  // namespace

std::vector<FieldViolation> PlanWarnings(const SweepSpec& spec, const std::vector<RunSpec>& runs) {
  std::vector<FieldViolation> warnings;
  if (!spec.allow_undertrained()) {
    const std::map<std::string, double> per_param = DenseOneCTokensPerParam(runs);
    for (int b = 0; b < spec.grid().compute_size(); ++b) {
      const std::string label = BudgetLabel(spec.grid().compute(b), b);
      auto it = per_param.find(label);
      if (it == per_param.end() || it->second >= kRegimeTokensPerParam) continue;
      warnings.push_back(
          {absl::StrCat("grid.compute[", b, "]"),
           absl::StrFormat("dense 1C at %s trains %.3g tokens per parameter (< %g, the papers' "
                           "regime): an undertrained baseline favours the MoE; raise the budget "
                           "or lower N, or set allow_undertrained: true to silence",
                           label, it->second, kRegimeTokensPerParam)});
    }
  }
  const std::map<std::string, uint32_t> top_k = TopKByPoint(runs);
  for (int i = 0; i < spec.grid().moe_size(); ++i) {
    const std::string label = MoePointLabel(spec.grid().moe(i));
    auto it = top_k.find(label);
    if (it == top_k.end()) continue;
    const std::string path = absl::StrCat("grid.moe[", i, "]");
    if (it->second == 1) {
      warnings.push_back(
          {path, absl::StrCat(label,
                              " routes each token to K = 1 expert; the equal-resource paper avoids "
                              "K = 1 (a middle range of K works best): pin top_k (e.g. 2 to 8) "
                              "beside the target r_a")});
    } else if (it->second > kMaxRecommendedTopK) {
      warnings.push_back(
          {path, absl::StrCat(label, " routes each token to K = ", it->second,
                              " experts, above the middle range the equal-resource paper "
                              "recommends (K ≤ ",
                              kMaxRecommendedTopK,
                              "): pin top_k beside the target r_a, or use finer experts")});
    }
  }
  return warnings;
}

}  // namespace parity::core
