#include "cli/report_analysis.h"

#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "cli/report_format.h"
#include "cli/table.h"
#include "fmt/format.h"

namespace parity::cli {
namespace {

using parity::v1::AnalyzeSweepResponse;
using parity::v1::ConfidenceInterval;

template <typename Format>
std::string WithInterval(double value, bool has_interval, const ConfidenceInterval& interval,
                         Format format) {
  if (!has_interval) return format(value);
  return fmt::format("{} [{} – {}]", format(value), format(interval.low()),
                     format(interval.high()));
}

// A Markdown table; a '|' inside a cell is escaped.
std::string Markdown(const std::vector<std::string>& header,
                     const std::vector<std::vector<std::string>>& rows) {
  auto line = [](const std::vector<std::string>& cells) {
    std::vector<std::string> escaped;
    for (const std::string& cell : cells)
      escaped.push_back(absl::StrReplaceAll(cell, {{"|", "\\|"}}));
    return absl::StrCat("| ", absl::StrJoin(escaped, " | "), " |\n");
  };
  std::string out = line(header) + "|";
  for (size_t i = 0; i < header.size(); ++i) out += "---|";
  out += "\n";
  for (const auto& row : rows) out += line(row);
  return out + "\n";
}

std::string LawTable(const parity::v1::DenseComputeFit& f) {
  const auto sci = [](double v) { return Sci(v); };
  const auto four = [](double v) { return Fixed(v); };
  std::string out =
      Markdown({"parameter", "value [90% interval]"},
               {{"a", WithInterval(f.a(), f.has_a_interval(), f.a_interval(), sci)},
                {"b", WithInterval(f.b(), f.has_b_interval(), f.b_interval(), four)},
                {"c (bits/byte)", WithInterval(f.c(), f.has_c_interval(), f.c_interval(), four)}});
  if (!f.interval_note().empty())
    absl::StrAppend(&out, "No intervals: ", f.interval_note(), ".\n\n");
  return out;
}

std::string FixedNLaw(const AnalyzeSweepResponse& a) {
  if (!a.has_dense_fit()) return absl::StrCat("Not fitted: ", a.dense_fit_refusal(), "\n\n");
  const parity::v1::DenseComputeFit& f = a.dense_fit();
  return fmt::format(
             "The dense shape nearest in N to the MoE runs (N = {}), fitted to its own runs: "
             "L(C) = a·C^-b + c over {} dense runs at {} compute budgets (Huber loss, c kept in "
             "[0, lowest loss); {} dense runs that repeat their data left out); RMS residual {} "
             "bits/byte. Fixed-N EL is measured on this law.\n\n",
             HumanCount(double(a.dense_fit_params())), f.points(), f.budgets(),
             f.repeated_data_excluded(), Fixed(f.rms_residual())) +
         LawTable(f);
}

std::string Frontier(const AnalyzeSweepResponse& a) {
  if (!a.has_dense_frontier())
    return absl::StrCat("Not built: ", a.dense_frontier_refusal(), "\n\n");
  const parity::v1::DenseFrontier& f = a.dense_frontier();
  std::vector<std::vector<std::string>> rows;
  for (const parity::v1::DenseFrontierPoint& p : f.points()) {
    rows.push_back({Sci(p.compute()), HumanCount(double(p.params())),
                    fmt::format("{} (n={})", Fixed(p.bpc()), p.seeds()),
                    std::to_string(p.sizes())});
  }
  std::string out = fmt::format(
      "At each budget the best dense size measured (seeds averaged per size) over {} fresh-data "
      "dense runs; L*(C) = a·C^-b + c fitted to those points. Frontier EL — the papers' EL — is "
      "measured on this law; one size per budget makes it the fixed-N law.\n\n",
      f.runs());
  out += Markdown({"budget C (FLOPs)", "best size N", "BPC (seeds)", "sizes measured"}, rows);
  if (f.has_law()) {
    absl::StrAppend(&out,
                    fmt::format("L*(C) over {} frontier points; RMS residual {} bits/byte.\n\n",
                                f.law().points(), Fixed(f.law().rms_residual())),
                    LawTable(f.law()));
  } else {
    absl::StrAppend(&out, "L*(C) not fitted: ", f.law_refusal(), "\n\n");
  }
  if (!f.replicate_note().empty())
    absl::StrAppend(&out, "Bootstrap: ", f.replicate_note(), ".\n\n");
  return out;
}

std::string Leverage(const AnalyzeSweepResponse& a) {
  std::vector<std::vector<std::string>> rows;
  for (const parity::v1::GridPointSummary& p : a.grid_points()) {
    if (p.role() != parity::v1::RUN_ROLE_MOE) continue;
    rows.push_back({p.name(), p.group(), Percent(p.activation_rate()),
                    fmt::format("{} (n={})", Fixed(p.bpc_mean()), p.seeds()),
                    LeverageText(p.frontier_leverage()), LeverageText(p.fixed_n_leverage())});
  }
  return "Frontier EL is the papers' EL (against the compute-optimal dense frontier); fixed-N EL "
         "is against the one dense shape's own law and overstates it far from compute-optimal "
         "training. Both at the grid point's mean loss, 90% intervals with dense and MoE seeds "
         "bootstrapped; \"extrapolated ×k\": the dense compute lies k times outside the measured "
         "dense range.\n\n" +
         Markdown({"model", "group", "r_a", "BPC (seeds)", "frontier EL [90%]", "fixed-N EL [90%]"},
                  rows);
}

std::string Optima(const AnalyzeSweepResponse& a) {
  std::vector<std::vector<std::string>> rows;
  std::string details;
  for (const parity::v1::OptimalActivation& o : a.optimal_activation()) {
    rows.push_back(
        {o.group().empty() ? absl::StrCat(o.compute_budget(), "/", o.data_variant()) : o.group(),
         fmt::format("{} ({})", Percent(o.best_grid_activation_rate()), Fixed(o.best_grid_bpc())),
         RegionText(o), LackOfFitText(o.lack_of_fit()), PointOptimumText(o),
         fmt::format("{} / {}", o.points(), o.rates())});
    std::vector<std::vector<std::string>> grid;
    for (const parity::v1::RatePoint& p : o.grid()) {
      grid.push_back({Percent(p.activation_rate()),
                      p.seeds() > 1 ? fmt::format("{} ± {} (n={})", Fixed(p.bpc_mean()),
                                                  Fixed(p.bpc_spread()), p.seeds())
                                    : fmt::format("{} (n=1)", Fixed(p.bpc_mean())),
                      o.probability_resamples() > 0 ? Percent(p.probability_best()) : "—",
                      RegionStatusText(p.region()),
                      p.has_p_value_above_best() ? PValue(p.p_value_above_best()) : "—"});
    }
    absl::StrAppend(&details, "### ", rows.back()[0], "\n\n", "Region: ", o.region_note(), ". ",
                    o.probability_resamples() > 0
                        ? fmt::format("P(best) over {} seed resamples.", o.probability_resamples())
                        : "P(best) not estimated: no r_a has two seeds.",
                    o.lack_of_fit().curve().empty()
                        ? ""
                        : absl::StrCat(" Lack of fit of the ", o.lack_of_fit().curve(), ": ",
                                       LackOfFitText(o.lack_of_fit()), "."),
                    "\n\n",
                    Markdown({"r_a", "BPC ± spread", "P(best)", "region", "p (above best)"}, grid));
  }
  return "Per group, as the papers report it: the best grid point, the region of grid points not "
         "significantly above it (one-sided Welch, α = 0.10), a lack-of-fit test, and a point "
         "optimum with its 90% bracket only when the fit passes and both ends are significantly "
         "above the best.\n\n" +
         Markdown({"group", "best grid r_a (mean BPC)", "region", "lack of fit",
                   "point optimum [90% bracket]", "runs / r_a"},
                  rows) +
         details;
}

std::string Baselines(const AnalyzeSweepResponse& a) {
  std::vector<std::vector<std::string>> rows;
  for (const parity::v1::GridPointSummary& p : a.grid_points()) {
    for (const parity::v1::BaselineDelta& d : p.baselines()) {
      rows.push_back({p.name(), p.group(), d.baseline(), fmt::format("{:g}C", d.compute_multiple()),
                      d.data_variant(), Signed(d.delta_bpc()), Fixed(d.delta_spread()),
                      VerdictText(d.verdict()), WelchText(d)});
    }
  }
  if (rows.empty()) return "No grid point has a finished dense baseline in its group.\n\n";
  return Markdown({"model", "group", "baseline", "multiple", "baseline data", "ΔBPC", "spread",
                   "ΔBPC vs noise", "Welch (two-sided)"},
                  rows);
}

std::string ElLaw(const AnalyzeSweepResponse& a) {
  if (!a.has_efficiency_leverage_law()) {
    return absl::StrCat("Not fitted: ", a.efficiency_leverage_law_refusal(), "\n\n");
  }
  const auto& law = a.efficiency_leverage_law();
  std::string out = fmt::format(
      "Refitted to the fixed-N EL of {} MoE runs at {} budgets and {} granularities (A_start, "
      "A_max kept published); RMS of ln(EL measured / fitted) {}.\n\n",
      law.points(), law.budgets(), law.granularities(), Fixed(law.rms_log_residual(), 3));
  return out + Markdown({"coefficient", "fitted", "published"},
                        {{"a", Fixed(law.fitted().a()), Fixed(law.published().a())},
                         {"d", Fixed(law.fitted().d()), Fixed(law.published().d())},
                         {"γ", Fixed(law.fitted().gamma()), Fixed(law.published().gamma())},
                         {"β", Fixed(law.fitted().beta()), Fixed(law.published().beta())}});
}

std::string GridPoints(const AnalyzeSweepResponse& a) {
  std::vector<std::vector<std::string>> rows;
  for (const parity::v1::GridPointSummary& p : a.grid_points()) {
    const bool dense = p.role() != parity::v1::RUN_ROLE_MOE;
    const bool delta = p.verdict() != parity::v1::DELTA_VERDICT_NO_BASELINE &&
                       p.verdict() != parity::v1::DELTA_VERDICT_IS_BASELINE;
    rows.push_back({p.name(), p.compute_budget(), p.data_variant(), HumanCount(double(p.params())),
                    HumanCount(double(p.active_params())),
                    dense ? "100%" : Percent(p.activation_rate()), HumanCount(double(p.tokens())),
                    HumanCount(double(p.unique_tokens())), Fixed(p.epochs(), 2),
                    p.seeds() > 1 ? fmt::format("{} ± {} (n={})", Fixed(p.bpc_mean()),
                                                Fixed(p.bpc_spread()), p.seeds())
                                  : fmt::format("{} (n=1)", Fixed(p.bpc_mean())),
                    delta ? Signed(p.delta_bpc()) : "—", VerdictText(p.verdict())});
  }
  return Markdown({"model", "budget", "data", "N", "N_a", "r_a", "D", "D̂", "epochs", "BPC ± spread",
                   "ΔBPC vs 1C dense", "ΔBPC vs noise"},
                  rows);
}

std::string RunLeverage(const AnalyzeSweepResponse& a) {
  std::vector<std::vector<std::string>> rows;
  const auto two = [](double v) { return fmt::format("{:.2f}", v); };
  for (const parity::v1::RunLeverage& l : a.leverage()) {
    rows.push_back(
        {l.name(), Percent(l.activation_rate()),
         l.efficiency_leverage() > 0
             ? WithInterval(l.efficiency_leverage(), l.has_efficiency_leverage_interval(),
                            l.efficiency_leverage_interval(), two)
             : absl::StrCat("— (", l.efficiency_leverage_missing(), ")"),
         l.predicted_efficiency_leverage() > 0 ? two(l.predicted_efficiency_leverage()) : "—",
         l.fitted_law_efficiency_leverage() > 0 ? two(l.fitted_law_efficiency_leverage()) : "—"});
  }
  return Markdown({"run", "r_a", "fixed-N EL measured [90% interval]",
                   "EL predicted (published law)", "EL (law refitted to this sweep)"},
                  rows);
}

const parity::v1::GridPointSummary* BestPoint(const AnalyzeSweepResponse& a,
                                              const parity::v1::OptimalActivation& o) {
  const parity::v1::GridPointSummary* best = nullptr;
  for (const parity::v1::GridPointSummary& p : a.grid_points()) {
    if (p.role() != parity::v1::RUN_ROLE_MOE || p.group() != o.group()) continue;
    if (std::fabs(p.activation_rate() - o.best_grid_activation_rate()) > 1e-9) continue;
    if (best == nullptr || p.bpc_mean() < best->bpc_mean()) best = &p;
  }
  return best;
}

}  // namespace

std::string OptimumLines(const AnalyzeSweepResponse& analysis) {
  std::string out;
  for (const parity::v1::OptimalActivation& o : analysis.optimal_activation()) {
    absl::StrAppend(&out, "  ", o.group(), ": best grid r_a ",
                    Percent(o.best_grid_activation_rate()), " (BPC ", Fixed(o.best_grid_bpc()),
                    "); region ", RegionText(o), "; lack of fit ", LackOfFitText(o.lack_of_fit()),
                    "; point optimum ", PointOptimumText(o), "\n");
    if (const parity::v1::GridPointSummary* best = BestPoint(analysis, o)) {
      absl::StrAppend(&out, "    ", best->name(), ": frontier EL ",
                      LeverageText(best->frontier_leverage()), "; fixed-N EL ",
                      LeverageText(best->fixed_n_leverage()), "\n");
    }
  }
  return out;
}

std::string AnalysisMarkdown(const std::string& sweep_name,
                             const std::optional<AnalyzeSweepResponse>& analysis,
                             const absl::Status& error) {
  std::string out = absl::StrCat("# Analysis of sweep ", sweep_name, "\n\n");
  if (!analysis) return absl::StrCat(out, "Not available: ", error.message(), "\n");
  const AnalyzeSweepResponse& a = *analysis;
  absl::StrAppend(&out,
                  "Intervals are 90% percentile-bootstrap intervals (fixed RNG seed); tests are at "
                  "α = 0.10.\n\n");
  absl::StrAppend(&out, "## Efficiency leverage per MoE grid point\n\n", Leverage(a));
  absl::StrAppend(&out, "## Optimal activation rate per group\n\n", Optima(a));
  absl::StrAppend(&out, "## ΔBPC against every dense baseline\n\n", Baselines(a));
  absl::StrAppend(&out, "## Compute-optimal dense frontier (frontier EL)\n\n", Frontier(a));
  absl::StrAppend(&out, "## Fixed-N dense law (fixed-N EL)\n\n", FixedNLaw(a));
  absl::StrAppend(&out, "## Joint efficiency-leverage law EL(A, G, C)\n\n", ElLaw(a));
  absl::StrAppend(&out, "## Grid points (mean over seeds)\n\n", GridPoints(a));
  absl::StrAppend(&out, "## Fixed-N efficiency leverage per MoE run\n\n", RunLeverage(a));
  return out;
}

std::string EvalSetsMarkdown(const std::vector<AnalyzeSweepResponse>& other_sets) {
  std::string out;
  for (const AnalyzeSweepResponse& a : other_sets) {
    absl::StrAppend(&out, "## Evaluation set \"", a.eval_set(), "\"\n\n",
                    "The same analysis on each run's final BPC on this set (runs that did not "
                    "report it are left out).\n\n");
    // Each group's grid table under a heading that names the set, so that no heading of the
    // primary analysis repeats.
    const std::string optima =
        absl::StrReplaceAll(Optima(a), {{"\n### ", absl::StrCat("\n#### ", a.eval_set(), ": ")}});
    absl::StrAppend(&out, "### Optimal activation rate per group on \"", a.eval_set(), "\"\n\n",
                    optima);
    absl::StrAppend(&out, "### ΔBPC against every dense baseline on \"", a.eval_set(), "\"\n\n",
                    Baselines(a));
  }
  return out;
}

}  // namespace parity::cli
