#include "core/planner_warnings.h"

#include <limits>
#include <map>
#include <string>
#include <utility>
#include <vector>

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

// The grid coordinates in which two groups differ, "moe=a" and "moe=b"; the budget and seed are
// left out (groups compared share the budget, and a seed is never shared).
std::pair<std::string, std::string> Difference(const parity::v1::GroupRef& a,
                                               const parity::v1::GroupRef& b, std::string& axis) {
  std::map<std::string, std::pair<std::string, std::string>> keys;
  for (const auto& [k, v] : a.grid_point()) keys[k].first = v;
  for (const auto& [k, v] : b.grid_point()) keys[k].second = v;
  std::string left, right;
  for (const auto& [k, values] : keys) {
    if (k == "compute" || k == "seed" || values.first == values.second) continue;
    if (axis.empty()) axis = k;
    absl::StrAppend(&left, left.empty() ? "" : ", ", k, "=", values.first);
    absl::StrAppend(&right, right.empty() ? "" : ", ", k, "=", values.second);
  }
  return {left, right};
}

// The spec path of the axis a grid-point key comes from.
std::string AxisPath(const std::string& key) {
  if (key == "dense_size") return "grid.dense_sizes";
  if (key == "baseline" || key == "baseline_data") return "baselines";
  if (key == "data") return "grid.data";
  if (parity::v1::TrainingSpec::descriptor()->FindFieldByName(key) != nullptr) {
    return "grid.hyperparameters";
  }
  return "grid.moe";  // the point's label and its ablation keys (top_k, layout, balance, ...)
}

// Grid points that planned the identical run, which the planner merged (planner_sharing.h).
// Merges the design expects are not reported: across budgets (dense 2C of C1 is dense 1C of C2),
// across roles (the frontier's 1.0× size is the 1C baseline) and a dense run across data variants
// (strict reuse of its own D is unique data). What is left is an axis value that changes nothing.
void IdenticalPointWarnings(const std::vector<RunSpec>& runs,
                            std::vector<FieldViolation>& warnings) {
  struct Collapse {
    std::string path, example, budget;
    int runs = 0;
  };
  std::map<std::pair<std::string, std::string>, Collapse> collapsed;  // in first-seen order below
  std::vector<std::pair<std::string, std::string>> order;
  for (const RunSpec& run : runs) {
    const std::vector<parity::v1::GroupRef> groups = GroupsOf(run);
    for (size_t j = 1; j < groups.size(); ++j) {
      const parity::v1::GroupRef& a = groups[0];
      const parity::v1::GroupRef& b = groups[j];
      if (a.role() != b.role() || a.compute_budget() != b.compute_budget()) continue;
      if (a.data_variant() != b.data_variant() && a.role() != parity::v1::RUN_ROLE_MOE) continue;
      std::string axis;
      auto difference = Difference(a, b, axis);
      if (difference.first.empty()) continue;
      auto [it, inserted] = collapsed.try_emplace(difference);
      if (inserted) {
        order.push_back(difference);
        it->second = {AxisPath(axis), run.name(), a.compute_budget(), 0};
      }
      ++it->second.runs;
    }
  }
  for (const auto& key : order) {
    const Collapse& c = collapsed.at(key);
    warnings.push_back(
        {c.path, absl::StrFormat(
                     "grid points %s and %s plan the identical model, training and data (%d "
                     "run%s planned once, e.g. '%s' at %s): one of them is redundant; remove "
                     "it or change it so the two differ",
                     key.first, key.second, c.runs, c.runs == 1 ? "" : "s", c.example, c.budget)});
  }
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
  IdenticalPointWarnings(runs, warnings);
  return warnings;
}

}  // namespace parity::core
