// A sweep's whole analysis (AnalyzeFinishedRuns) and the refit of the joint EL law.
//
// The joint law ln EL = ln Â · (a + d·log₁₀C + γ·(log₂G)² + β·log₂G) is linear in (a, d, γ, β)
// once A_start and A_max fix Â, so it is an ordinary least-squares fit in log space; the
// saturation constants stay at their published values because a sweep's few activation ratios
// cannot identify them. d needs two budgets, γ and β three granularities, and four coefficients
// need a fifth run to leave a residual.
#include <algorithm>
#include <array>
#include <cmath>
#include <iterator>
#include <map>
#include <set>
#include <tuple>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/analysis.h"
#include "core/analysis_stats.h"
#include "core/planner_sharing.h"

namespace parity::core {
namespace {

// Runs of one budget differ in C by token rounding (D = round(C·m/M)); budgets differ by far
// more than 1%.
int CountDistinct(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  int distinct = 0;
  for (size_t i = 0; i < values.size(); ++i) {
    distinct += i == 0 || values[i] > values[i - 1] * 1.01;
  }
  return distinct;
}

// "moe-ra20-C1-unique-s1" → "moe-ra20-C1-unique": the grid point of a run.
std::string PointName(const std::string& run_name) {
  const size_t dash = run_name.rfind("-s");
  if (dash == std::string::npos || dash + 2 == run_name.size()) return run_name;
  for (size_t i = dash + 2; i < run_name.size(); ++i) {
    if (run_name[i] < '0' || run_name[i] > '9') return run_name;
  }
  return run_name.substr(0, dash);
}

// Dense baselines and the dense frontier's other sizes all measure the dense side.
bool IsDense(const parity::v1::RunSpec& spec) {
  return spec.role() == parity::v1::RUN_ROLE_DENSE_BASELINE ||
         spec.role() == parity::v1::RUN_ROLE_DENSE_FRONTIER;
}

// A run as it serves one group.
struct Served {
  const FinishedRun* run = nullptr;
  GroupMembership membership;
};

std::vector<Served> Expand(std::span<const FinishedRun> runs) {
  std::vector<Served> out;
  for (const FinishedRun& run : runs) {
    if (run.memberships.empty()) {
      for (GroupMembership& m : GroupMembershipsOf(*run.spec)) out.push_back({&run, std::move(m)});
    }
    for (const GroupMembership& m : run.memberships) out.push_back({&run, m});
  }
  return out;
}

struct PointRuns {
  GridPointSummary summary;
  std::vector<double> bpc, leverage;
  MoePointRuns moe;
};

std::vector<GridPointSummary> SummarizeGridPoints(const std::vector<Served>& served,
                                                  const SweepAnalysis& analysis,
                                                  const DenseFrontier* frontier,
                                                  const DenseFrontier* fixed_n) {
  std::map<std::string, double> el_of;
  for (const RunLeverageResult& l : analysis.leverage) {
    if (l.efficiency_leverage) el_of[l.run_id] = *l.efficiency_leverage;
  }
  std::vector<PointRuns> points;
  for (const Served& s : served) {
    const parity::v1::RunSpec& spec = *s.run->spec;
    const std::string name = PointName(s.membership.name.empty() ? spec.name() : s.membership.name);
    const std::string group = GroupKey(s.membership);
    auto it = std::find_if(points.begin(), points.end(), [&](const PointRuns& p) {
      return p.summary.name == name && p.summary.group == group;
    });
    if (it == points.end()) {
      GridPointSummary g;
      const parity::v1::Accounting& a = spec.accounting();
      g.name = name;
      g.group = group;
      g.role =
          s.membership.role != parity::v1::RUN_ROLE_UNSPECIFIED ? s.membership.role : spec.role();
      g.compute_budget = s.membership.compute_budget;
      g.data_variant = s.membership.data_variant;
      g.compute_multiple = s.membership.compute_multiple;
      g.params = a.params();
      g.active_params = a.active_params();
      g.tokens = a.tokens();
      g.unique_tokens = a.unique_tokens();
      g.activation_rate = a.activation_rate();
      g.epochs = a.epochs();
      points.push_back(
          {std::move(g), {}, {}, {.compute = a.compute_flops(), .bpc = {}, .keys = {}}});
      it = std::prev(points.end());
    }
    it->bpc.push_back(s.run->val_bpc);
    it->moe.bpc.push_back(s.run->val_bpc);
    it->moe.keys.push_back(s.run->run_id);
    if (auto el = el_of.find(s.run->run_id); el != el_of.end()) it->leverage.push_back(el->second);
  }
  std::vector<GridPointSummary> out;
  std::map<std::string, std::vector<double>> bpc_of_point;
  for (PointRuns& p : points) {
    GridPointSummary& g = p.summary;
    g.seeds = static_cast<int>(p.bpc.size());
    g.bpc_mean = stats::Mean(p.bpc);
    g.bpc_spread = stats::Spread(p.bpc);
    if (!p.leverage.empty()) g.efficiency_leverage = stats::Mean(p.leverage);
    if (g.role == parity::v1::RUN_ROLE_MOE) {
      if (frontier)
        g.frontier_leverage = GridPointLeverage(LeverageKind::kFrontier, *frontier, p.moe);
      if (fixed_n) g.fixed_n_leverage = GridPointLeverage(LeverageKind::kFixedN, *fixed_n, p.moe);
    }
    bpc_of_point[g.group + "|" + g.name] = p.bpc;
    out.push_back(std::move(g));
  }
  CompareWithBaselines(out, bpc_of_point);
  return out;
}

}  // namespace

absl::StatusOr<ElLawFit> FitEfficiencyLeverageLaw(std::span<const ElObservation> runs) {
  std::vector<double> budgets, granularities;
  for (const ElObservation& o : runs) {
    if (!(o.activation_ratio > 0 && o.activation_ratio <= 1 && o.granularity > 0 && o.compute > 0 &&
          o.efficiency_leverage > 0 && std::isfinite(o.efficiency_leverage))) {
      return absl::InvalidArgumentError(absl::StrCat(
          "every run needs A in (0, 1], G > 0, C > 0 and EL > 0; got A = ", o.activation_ratio,
          ", G = ", o.granularity, ", C = ", o.compute, ", EL = ", o.efficiency_leverage));
    }
    budgets.push_back(o.compute);
    granularities.push_back(o.granularity);
  }
  ElLawFit fit;
  fit.points = static_cast<int>(runs.size());
  fit.budgets = CountDistinct(budgets);
  fit.granularities = CountDistinct(granularities);
  if (fit.points < 5 || fit.budgets < 2 || fit.granularities < 3) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the joint law's d needs MoE runs with a measured EL at ≥ 2 compute budgets, "
        "γ and β need ≥ 3 granularities, and its four coefficients ≥ 5 runs; this sweep has ",
        fit.points, " runs, ", fit.budgets, " budgets and ", fit.granularities, " granularities"));
  }
  std::array<std::array<double, 5>, 4> m{};
  std::vector<std::array<double, 4>> rows;
  for (const ElObservation& o : runs) {
    const double s = std::log(SaturatedActivationRatio(o.activation_ratio, fit.published));
    const double g = std::log2(o.granularity);
    const std::array<double, 4> row = {s, s * std::log10(o.compute), s * g * g, s * g};
    rows.push_back(row);
    for (int i = 0; i < 4; ++i) {
      for (int j = 0; j < 4; ++j) m[i][j] += row[i] * row[j];
      m[i][4] += row[i] * std::log(o.efficiency_leverage);
    }
  }
  for (int col = 0; col < 4; ++col) {
    int pivot = col;
    for (int r = col + 1; r < 4; ++r) {
      if (std::fabs(m[r][col]) > std::fabs(m[pivot][col])) pivot = r;
    }
    std::swap(m[col], m[pivot]);
    if (std::fabs(m[col][col]) < 1e-12 * (1 + std::fabs(m[0][0]))) {
      return absl::FailedPreconditionError(
          "the runs' activation ratios, budgets and granularities do not separate "
          "the law's terms (singular fit)");
    }
    for (int r = 0; r < 4; ++r) {
      if (r == col) continue;
      const double f = m[r][col] / m[col][col];
      for (int c = col; c < 5; ++c) m[r][c] -= f * m[col][c];
    }
  }
  fit.fitted = fit.published;
  fit.fitted.a = m[0][4] / m[0][0];
  fit.fitted.d = m[1][4] / m[1][1];
  fit.fitted.gamma = m[2][4] / m[2][2];
  fit.fitted.beta = m[3][4] / m[3][3];
  double sq = 0;
  for (size_t i = 0; i < runs.size(); ++i) {
    const double predicted = rows[i][0] * fit.fitted.a + rows[i][1] * fit.fitted.d +
                             rows[i][2] * fit.fitted.gamma + rows[i][3] * fit.fitted.beta;
    sq += std::pow(std::log(runs[i].efficiency_leverage) - predicted, 2);
  }
  fit.rms_log_residual = std::sqrt(sq / static_cast<double>(runs.size()));
  return fit;
}

std::vector<GroupMembership> GroupMembershipsOf(const parity::v1::RunSpec& spec) {
  static constexpr const char* kAblationAxes[] = {"layout", "balance", "shared_expert_hidden",
                                                  "granularity", "top_k"};
  std::vector<GroupMembership> memberships;
  for (const parity::v1::GroupRef& group : GroupsOf(spec)) {
    GroupMembership m{.compute_budget = group.compute_budget(),
                      .data_variant = group.data_variant(),
                      .compute_multiple = group.compute_multiple(),
                      .keys = {},
                      .name = group.name(),
                      .role = group.role()};
    if (group.role() == parity::v1::RUN_ROLE_MOE) {
      for (const char* axis : kAblationAxes) {
        if (auto it = group.grid_point().find(axis); it != group.grid_point().end()) {
          m.keys[axis] = it->second;
        }
      }
    }
    memberships.push_back(std::move(m));
  }
  return memberships;
}

std::string GroupKey(const GroupMembership& m) {
  std::string key = absl::StrCat(m.compute_budget, "/", m.data_variant);
  for (const auto& [axis, value] : m.keys) absl::StrAppend(&key, "/", axis, "=", value);
  return key;
}

namespace {

// The fresh-data dense runs (each once) and the N of the shape the fixed-N law uses: the dense
// size nearest (in ln N) to the median MoE N, or the size with most runs when there is no MoE.
struct DenseSelection {
  std::vector<DenseRun> all, shape;
  double shape_params = 0;
  int repeated = 0;
};

DenseSelection SelectDense(std::span<const FinishedRun> runs) {
  DenseSelection d;
  std::vector<double> moe_params;
  for (const FinishedRun& run : runs) {
    const auto& a = run.spec->accounting();
    if (run.spec->role() == parity::v1::RUN_ROLE_MOE) moe_params.push_back(double(a.params()));
    if (!IsDense(*run.spec)) continue;
    // The compute law is a law of fresh data: a dense run that repeats its data (strict reuse
    // at 2C, two epochs) pays for repetition too and would bend it.
    if (a.epochs() > 1 + 1e-6) {
      ++d.repeated;
      continue;
    }
    d.all.push_back({run.run_id, a.compute_flops(), double(a.params()), run.val_bpc});
  }
  if (d.all.empty()) return d;
  std::sort(moe_params.begin(), moe_params.end());
  std::map<double, int> count;  // a representative N per size → runs
  for (const DenseRun& r : d.all) {
    auto it = std::find_if(count.begin(), count.end(), [&](const auto& c) {
      return std::fabs(std::log(r.params / c.first)) < std::log(1.01);
    });
    if (it == count.end()) it = count.emplace(r.params, 0).first;
    ++it->second;
  }
  double best_score = 1e300;
  for (const auto& [n, runs_of] : count) {
    const double score =
        moe_params.empty() ? -runs_of : std::fabs(std::log(n / moe_params[moe_params.size() / 2]));
    if (score < best_score) {
      best_score = score;
      d.shape_params = n;
    }
  }
  for (const DenseRun& r : d.all) {
    if (std::fabs(std::log(r.params / d.shape_params)) < std::log(1.01)) d.shape.push_back(r);
  }
  return d;
}

}  // namespace

SweepAnalysis AnalyzeFinishedRuns(std::span<const FinishedRun> all) {
  std::vector<FinishedRun> runs;
  for (const FinishedRun& run : all) {
    if (run.spec != nullptr) runs.push_back(run);
  }
  SweepAnalysis analysis;
  const DenseSelection dense = SelectDense(runs);
  const int repeated = dense.repeated;
  std::vector<Observation> shape_runs;
  std::set<std::string> seen_dense;
  for (const DenseRun& r : dense.shape) {
    if (seen_dense.insert(r.run_key).second) shape_runs.push_back({r.compute, r.bpc});
  }
  analysis.dense_fit_params = dense.shape_params;
  if (!shape_runs.empty()) analysis.dense_fit = FitDenseComputeLaw(shape_runs);
  if (analysis.dense_fit.ok()) {
    analysis.dense_fit->repeated_data_excluded = repeated;
  } else if (repeated > 0) {
    analysis.dense_fit =
        absl::Status(analysis.dense_fit.status().code(),
                     absl::StrCat(analysis.dense_fit.status().message(), " (", repeated,
                                  " dense runs that repeat their data are left out of the law)"));
  }
  absl::StatusOr<DenseFrontier> fixed_n = BuildDenseFrontier(dense.shape);
  if (!dense.all.empty()) analysis.frontier = BuildDenseFrontier(dense.all);
  const std::vector<Served> served = Expand(runs);

  struct Group {
    std::string budget, variant, key;
    std::vector<RateRun> points;
  };
  std::vector<Group> groups;
  std::vector<ElObservation> el_runs;
  for (const FinishedRun& run : runs) {
    const parity::v1::RunSpec& spec = *run.spec;
    if (spec.role() != parity::v1::RUN_ROLE_MOE) continue;
    const auto& a = spec.accounting();
    RunLeverageResult leverage;
    leverage.run_id = run.run_id;
    leverage.name = spec.name();
    leverage.activation_rate = a.activation_rate();
    leverage.predicted_efficiency_leverage = spec.predicted_efficiency_leverage();
    if (!analysis.dense_fit.ok()) {
      leverage.missing_reason =
          absl::StrCat("no dense law: ", analysis.dense_fit.status().message());
    } else if (absl::StatusOr<double> el =
                   MeasuredEfficiencyLeverage(*analysis.dense_fit, run.val_bpc, a.compute_flops());
               !el.ok()) {
      leverage.missing_reason = std::string(el.status().message());
    } else {
      leverage.efficiency_leverage = *el;
      leverage.efficiency_leverage_interval =
          EfficiencyLeverageInterval(*analysis.dense_fit, run.val_bpc, a.compute_flops());
      if (a.expert_activation_ratio() > 0 && a.granularity() > 0) {
        el_runs.push_back({a.expert_activation_ratio(), a.granularity(), a.compute_flops(), *el});
      }
    }
    analysis.leverage.push_back(std::move(leverage));
  }
  for (const Served& s : served) {
    if (s.run->spec->role() != parity::v1::RUN_ROLE_MOE) continue;
    const std::string key = GroupKey(s.membership);
    auto it =
        std::find_if(groups.begin(), groups.end(), [&](const Group& g) { return g.key == key; });
    if (it == groups.end()) {
      groups.push_back({s.membership.compute_budget, s.membership.data_variant, key, {}});
      it = std::prev(groups.end());
    }
    it->points.push_back(
        {s.run->spec->accounting().activation_rate(), s.run->val_bpc, s.run->run_id});
  }
  for (const Group& g : groups) {
    analysis.optimal_activation.push_back(
        {g.budget, g.variant, g.key, FitOptimalActivation(std::span<const RateRun>(g.points))});
  }
  if (!analysis.dense_fit.ok()) {
    analysis.el_law = absl::FailedPreconditionError(
        "no MoE run has a measured EL, because the dense law was not fitted");
  } else {
    analysis.el_law = FitEfficiencyLeverageLaw(el_runs);
  }
  if (analysis.el_law.ok()) {
    for (size_t i = 0, r = 0; i < runs.size(); ++i) {
      const parity::v1::RunSpec& spec = *runs[i].spec;
      if (spec.role() != parity::v1::RUN_ROLE_MOE) continue;
      const auto& a = spec.accounting();
      const double el = PredictedEfficiencyLeverage(a.expert_activation_ratio(), a.granularity(),
                                                    a.compute_flops(), analysis.el_law->fitted);
      if (el > 0) analysis.leverage[r].joint_law_efficiency_leverage = el;
      ++r;
    }
  }
  analysis.grid_points =
      SummarizeGridPoints(served, analysis, analysis.frontier.ok() ? &*analysis.frontier : nullptr,
                          fixed_n.ok() ? &*fixed_n : nullptr);
  return analysis;
}

}  // namespace parity::core
