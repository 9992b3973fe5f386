// The optimal activation rate of one group. BPC is modelled as a quadratic q(t) in t = ln r_a
// over every run of the group; an optimum is reported only when the grid brackets one (an
// interior r_a whose mean over seeds is below both ends), because a vertex outside the measured
// range is an extrapolation, not a finding. Uncertainty: a bootstrap that resamples seeds within
// each r_a (as deviations from the rate's mean, inflated for the small number of seeds), refits q
// and takes its minimum over the measured range [t_min, t_max]. A resample whose vertex leaves the
// range (or whose q is not convex) is clamped to the lower end of q on the range rather than
// dropped: dropping would keep only the resamples that agree with the bracket and overstate
// confidence; clamped, the interval reaches the edge, which is what the data say. The number
// clamped is reported. So no value outside the grid is ever printed.
#include <algorithm>
#include <array>
#include <cmath>
#include <optional>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/analysis.h"
#include "core/analysis_stats.h"

namespace parity::core {
namespace {

struct Rate {
  double rate = 0;
  double t = 0;  // ln r_a − the group's mean ln r_a
  std::vector<double> bpc;
};

std::string Percent(double fraction) { return absl::StrFormat("%.3g%%", 100 * fraction); }

// Least squares y = p0 + p1·t + p2·t² over every run of every rate.
std::optional<std::array<double, 3>> FitQuadratic(const std::vector<Rate>& rates) {
  std::array<std::array<double, 4>, 3> m{};
  for (const Rate& r : rates) {
    const double row[3] = {1, r.t, r.t * r.t};
    for (double y : r.bpc) {
      for (int i = 0; i < 3; ++i) {
        for (int j = 0; j < 3; ++j) m[i][j] += row[i] * row[j];
        m[i][3] += row[i] * y;
      }
    }
  }
  for (int col = 0; col < 3; ++col) {
    int pivot = col;
    for (int r = col + 1; r < 3; ++r) {
      if (std::fabs(m[r][col]) > std::fabs(m[pivot][col])) pivot = r;
    }
    std::swap(m[col], m[pivot]);
    if (std::fabs(m[col][col]) < 1e-300) return std::nullopt;
    for (int r = 0; r < 3; ++r) {
      if (r == col) continue;
      const double f = m[r][col] / m[col][col];
      for (int c = col; c < 4; ++c) m[r][c] -= f * m[col][c];
    }
  }
  return std::array<double, 3>{m[0][3] / m[0][0], m[1][3] / m[1][1], m[2][3] / m[2][2]};
}

double Evaluate(const std::array<double, 3>& p, double t) { return p[0] + p[1] * t + p[2] * t * t; }

struct Minimum {
  double t = 0;
  bool at_edge = false;
};

// The minimum of q over [lo, hi]: the vertex when q is convex with its vertex inside, else the
// lower end.
Minimum MinimumOnRange(const std::array<double, 3>& p, double lo, double hi) {
  if (p[2] > 0) {
    const double vertex = -p[1] / (2 * p[2]);
    if (vertex > lo && vertex < hi) return {vertex, false};
  }
  return {Evaluate(p, lo) <= Evaluate(p, hi) ? lo : hi, true};
}

}  // namespace

absl::StatusOr<OptimalActivationFit> FitOptimalActivation(std::span<const Observation> runs,
                                                          const BootstrapOptions& options) {
  std::vector<Observation> sorted(runs.begin(), runs.end());
  for (const Observation& o : sorted) {
    if (!(o.x > 0 && o.x <= 1) || !std::isfinite(o.y)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "every run needs r_a in (0, 1] and a finite BPC; got r_a = ", o.x, ", BPC = ", o.y));
    }
  }
  std::sort(sorted.begin(), sorted.end(),
            [](const Observation& l, const Observation& r) { return l.x < r.x; });
  std::vector<Rate> rates;
  double mean_log = 0;
  for (const Observation& o : sorted) {
    // Seeds of one grid point share r_a exactly; the tolerance only absorbs decimal round trips.
    if (rates.empty() || o.x > rates.back().rate * (1 + 1e-9)) {
      rates.push_back({o.x, 0, {}});
      mean_log += std::log(o.x);
    }
    rates.back().bpc.push_back(o.y);
  }
  mean_log /= static_cast<double>(rates.size());
  for (Rate& r : rates) r.t = std::log(r.rate) - mean_log;

  OptimalActivationFit out;
  out.points = static_cast<int>(sorted.size());
  out.rates = static_cast<int>(rates.size());
  std::vector<double> means;
  for (const Rate& r : rates) means.push_back(stats::Mean(r.bpc));
  const size_t lowest =
      static_cast<size_t>(std::min_element(means.begin(), means.end()) - means.begin());
  out.best_grid_activation_rate = rates[lowest].rate;
  out.best_grid_bpc = means[lowest];
  if (rates.size() < 3) {
    out.status = OptimumStatus::kTooFewRates;
    out.reason = absl::StrCat("an optimum needs ≥ 3 distinct r_a to bracket it; the group has ",
                              rates.size());
    return out;
  }
  if (lowest == 0 || lowest + 1 == rates.size() ||
      !(means[lowest] < means.front() && means[lowest] < means.back())) {
    out.status = OptimumStatus::kNotBracketed;
    const Rate& edge = means.front() <= means.back() ? rates.front() : rates.back();
    out.reason = absl::StrCat("not bracketed: lowest at the edge r_a = ", Percent(edge.rate));
    return out;
  }
  const double lo = rates.front().t, hi = rates.back().t;
  const std::optional<std::array<double, 3>> p = FitQuadratic(rates);
  const Minimum point = p ? MinimumOnRange(*p, lo, hi) : Minimum{0, true};
  if (point.at_edge) {
    out.status = OptimumStatus::kPoorFit;
    out.reason =
        absl::StrCat("the grid brackets a minimum near r_a = ", Percent(rates[lowest].rate),
                     ", but a quadratic in ln r_a does not place its minimum inside ",
                     Percent(rates.front().rate), "–", Percent(rates.back().rate));
    return out;
  }
  out.status = OptimumStatus::kBracketed;
  out.activation_rate = std::exp(point.t + mean_log);
  out.bpc = Evaluate(*p, point.t);

  if (std::none_of(rates.begin(), rates.end(), [](const Rate& r) { return r.bpc.size() > 1; })) {
    out.interval_note = "one seed per r_a: no seed-to-seed spread to resample, so no interval";
    return out;
  }
  // Each seed as its deviation from the rate's mean, inflated by √(n/(n−1)): resampling n seeds
  // from n shrinks their variance by (n−1)/n, which with 2–3 seeds would narrow the interval by
  // a fifth or more.
  std::vector<std::vector<double>> deviations;
  for (size_t i = 0; i < rates.size(); ++i) {
    const double n = static_cast<double>(rates[i].bpc.size());
    const double inflate = n > 1 ? std::sqrt(n / (n - 1)) : 0.0;
    deviations.emplace_back();
    for (double y : rates[i].bpc) deviations.back().push_back((y - means[i]) * inflate);
  }
  stats::Rng rng(options.seed);
  std::vector<Rate> resample = rates;
  std::vector<double> optimum_rates, optimum_bpcs;
  for (int k = 0; k < options.resamples; ++k) {
    for (size_t i = 0; i < rates.size(); ++i) {
      const std::vector<double>& seeds = deviations[i];
      for (double& y : resample[i].bpc) y = means[i] + seeds[rng.Below(seeds.size())];
    }
    const std::optional<std::array<double, 3>> q = FitQuadratic(resample);
    if (!q) continue;
    const Minimum m = MinimumOnRange(*q, lo, hi);
    out.resamples_at_edge += m.at_edge;
    // exp(t + mean) may round a hair past the grid; the clamp keeps the promise exactly.
    optimum_rates.push_back(
        std::clamp(std::exp(m.t + mean_log), rates.front().rate, rates.back().rate));
    optimum_bpcs.push_back(Evaluate(*q, m.t));
  }
  out.resamples = static_cast<int>(optimum_rates.size());
  out.activation_rate_interval = stats::PercentileInterval(optimum_rates);
  out.bpc_interval = stats::PercentileInterval(optimum_bpcs);
  out.activation_rate = std::clamp(out.activation_rate, rates.front().rate, rates.back().rate);
  if (out.resamples_at_edge > 0) {
    out.interval_note = absl::StrCat(out.resamples_at_edge, " of ", out.resamples,
                                     " resamples had their minimum at an end of the grid "
                                     "(clamped there, not dropped)");
  }
  return out;
}

}  // namespace parity::core
