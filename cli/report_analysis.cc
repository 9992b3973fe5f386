#include "cli/report_analysis.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "cli/table.h"
#include "fmt/format.h"

namespace parity::cli {
namespace {

using parity::v1::ConfidenceInterval;

std::string Percent(double fraction) { return fmt::format("{:.1f}%", 100 * fraction); }
std::string Fixed(double value, int digits = 4) { return fmt::format("{:.{}f}", value, digits); }

template <typename Format>
std::string WithInterval(double value, bool has_interval, const ConfidenceInterval& interval,
                         Format format) {
  if (!has_interval) return format(value);
  return fmt::format("{} [{} – {}]", format(value), format(interval.low()),
                     format(interval.high()));
}

// A Markdown table; cells must not hold '|'.
std::string Markdown(const std::vector<std::string>& header,
                     const std::vector<std::vector<std::string>>& rows) {
  std::string out = absl::StrCat("| ", absl::StrJoin(header, " | "), " |\n|");
  for (size_t i = 0; i < header.size(); ++i) out += "---|";
  out += "\n";
  for (const auto& row : rows) absl::StrAppend(&out, "| ", absl::StrJoin(row, " | "), " |\n");
  return out + "\n";
}

std::string OptimumCell(const parity::v1::OptimalActivation& o) {
  if (o.status() != parity::v1::OPTIMUM_STATUS_BRACKETED) return o.reason();
  return WithInterval(o.activation_rate(), o.has_activation_rate_interval(),
                      o.activation_rate_interval(), Percent);
}

std::string DenseLaw(const parity::v1::AnalyzeSweepResponse& a) {
  if (!a.has_dense_fit()) return absl::StrCat("Not fitted: ", a.dense_fit_refusal(), "\n\n");
  const parity::v1::DenseComputeFit& f = a.dense_fit();
  std::string out = fmt::format(
      "L(C) = a·C^-b + c over {} dense runs at {} compute budgets (Huber loss, c kept in "
      "[0, lowest loss); {} dense runs that repeat their data left out); RMS residual {} "
      "bits/byte.\n\n",
      f.points(), f.budgets(), f.repeated_data_excluded(), Fixed(f.rms_residual()));
  const auto sci = [](double v) { return Sci(v); };
  const auto four = [](double v) { return Fixed(v); };
  out +=
      Markdown({"parameter", "value [90% interval]"},
               {{"a", WithInterval(f.a(), f.has_a_interval(), f.a_interval(), sci)},
                {"b", WithInterval(f.b(), f.has_b_interval(), f.b_interval(), four)},
                {"c (bits/byte)", WithInterval(f.c(), f.has_c_interval(), f.c_interval(), four)}});
  if (!f.interval_note().empty())
    absl::StrAppend(&out, "No intervals: ", f.interval_note(), ".\n\n");
  return out;
}

std::string ElLaw(const parity::v1::AnalyzeSweepResponse& a) {
  if (!a.has_efficiency_leverage_law()) {
    return absl::StrCat("Not fitted: ", a.efficiency_leverage_law_refusal(), "\n\n");
  }
  const auto& law = a.efficiency_leverage_law();
  std::string out = fmt::format(
      "Refitted to {} MoE runs at {} budgets and {} granularities (A_start, A_max kept "
      "published); RMS of ln(EL measured / fitted) {}.\n\n",
      law.points(), law.budgets(), law.granularities(), Fixed(law.rms_log_residual(), 3));
  return out + Markdown({"coefficient", "fitted", "published"},
                        {{"a", Fixed(law.fitted().a()), Fixed(law.published().a())},
                         {"d", Fixed(law.fitted().d()), Fixed(law.published().d())},
                         {"γ", Fixed(law.fitted().gamma()), Fixed(law.published().gamma())},
                         {"β", Fixed(law.fitted().beta()), Fixed(law.published().beta())}});
}

std::string Verdict(parity::v1::DeltaVerdict verdict) {
  switch (verdict) {
    case parity::v1::DELTA_VERDICT_EXCEEDS_SPREAD:
      return "beyond seed spread";
    case parity::v1::DELTA_VERDICT_WITHIN_SPREAD:
      return "within seed spread";
    case parity::v1::DELTA_VERDICT_NO_SPREAD:
      return "one seed: spread unknown";
    case parity::v1::DELTA_VERDICT_NO_BASELINE:
      return "no 1C dense baseline";
    case parity::v1::DELTA_VERDICT_IS_BASELINE:
      return "reference";
    default:
      return "";
  }
}

std::string GridPoints(const parity::v1::AnalyzeSweepResponse& a) {
  std::vector<std::vector<std::string>> rows;
  for (const parity::v1::GridPointSummary& p : a.grid_points()) {
    const bool dense = p.role() == parity::v1::RUN_ROLE_DENSE_BASELINE;
    const bool delta = p.verdict() != parity::v1::DELTA_VERDICT_NO_BASELINE &&
                       p.verdict() != parity::v1::DELTA_VERDICT_IS_BASELINE;
    rows.push_back(
        {p.name(), p.compute_budget(), p.data_variant(), HumanCount(double(p.params())),
         HumanCount(double(p.active_params())), dense ? "100%" : Percent(p.activation_rate()),
         HumanCount(double(p.tokens())), HumanCount(double(p.unique_tokens())),
         Fixed(p.epochs(), 2),
         p.seeds() > 1
             ? fmt::format("{} ± {} (n={})", Fixed(p.bpc_mean()), Fixed(p.bpc_spread()), p.seeds())
             : fmt::format("{} (n=1)", Fixed(p.bpc_mean())),
         delta ? fmt::format("{:+.4f}", p.delta_bpc()) : "—", Verdict(p.verdict()),
         p.efficiency_leverage() > 0 ? fmt::format("{:.2f}", p.efficiency_leverage()) : "—"});
  }
  return Markdown({"model", "budget", "data", "N", "N_a", "r_a", "D", "D̂", "epochs", "BPC ± spread",
                   "ΔBPC vs 1C dense", "ΔBPC vs noise", "EL"},
                  rows);
}

std::string Leverage(const parity::v1::AnalyzeSweepResponse& a) {
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
  return Markdown(
      {"run", "r_a", "EL measured [90% interval]", "EL published law", "EL refitted law"}, rows);
}

}  // namespace

std::string OptimumLines(const parity::v1::AnalyzeSweepResponse& analysis) {
  std::string out;
  for (const parity::v1::OptimalActivation& o : analysis.optimal_activation()) {
    absl::StrAppend(&out, "  ", o.compute_budget(), " · ", o.data_variant(), ": ",
                    o.status() == parity::v1::OPTIMUM_STATUS_BRACKETED
                        ? absl::StrCat("optimal r_a ", OptimumCell(o))
                        : o.reason(),
                    "\n");
  }
  return out;
}

std::string AnalysisMarkdown(const std::string& sweep_name,
                             const std::optional<parity::v1::AnalyzeSweepResponse>& analysis,
                             const absl::Status& error) {
  std::string out = absl::StrCat("# Analysis of sweep ", sweep_name, "\n\n");
  if (!analysis) return absl::StrCat(out, "Not available: ", error.message(), "\n");
  const parity::v1::AnalyzeSweepResponse& a = *analysis;
  absl::StrAppend(&out, "Intervals are 90% percentile-bootstrap intervals (fixed RNG seed).\n\n");
  absl::StrAppend(&out, "## Dense compute law\n\n", DenseLaw(a));
  std::vector<std::vector<std::string>> optima;
  for (const parity::v1::OptimalActivation& o : a.optimal_activation()) {
    const bool bracketed = o.status() == parity::v1::OPTIMUM_STATUS_BRACKETED;
    optima.push_back(
        {o.compute_budget(), o.data_variant(), OptimumCell(o),
         bracketed ? WithInterval(o.bpc(), o.has_bpc_interval(), o.bpc_interval(),
                                  [](double v) { return Fixed(v); })
                   : "—",
         fmt::format("{} ({})", Percent(o.best_grid_activation_rate()), Fixed(o.best_grid_bpc())),
         fmt::format("{} / {}", o.points(), o.rates()), o.interval_note()});
  }
  absl::StrAppend(&out, "## Optimal activation rate\n\n",
                  Markdown({"budget", "data", "optimal r_a [90% interval]", "BPC at optimum",
                            "best grid r_a (mean BPC)", "runs / r_a", "note"},
                           optima));
  absl::StrAppend(&out, "## Joint efficiency-leverage law EL(A, G, C)\n\n", ElLaw(a));
  absl::StrAppend(&out, "## Grid points (mean over seeds)\n\n", GridPoints(a));
  absl::StrAppend(&out, "## Efficiency leverage per MoE run\n\n", Leverage(a));
  return out;
}

}  // namespace parity::cli
