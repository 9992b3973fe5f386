// The optimum of a group as the papers report it: the best grid point, each point's probability
// of being the best, and the region of points not distinguishable from the best; the fitted
// point optimum (analysis_optimum.cc) only when the grid brackets the best with evidence.
//
// Best-point probabilities: a wild bootstrap within each r_a — each seed's deviation from its
// r_a's mean, inflated by √(n/(n−1)), times a keyed standard-normal draw. It has the classical
// bootstrap's mean and variance (s²/n) but, unlike resampling 2–3 seeds with replacement, is not
// confined to a handful of values, and each run's draw depends only on its key, so a run shared
// by several groups is drawn once (analysis_stats.h).
//
// Region: one-sided Welch t test of each point against the best (H1: the point's mean is higher),
// α = 0.10; a point stays in the region while p ≥ 0.10. The best is chosen by the same data it is
// tested against, which biases its mean low and makes the test reject slightly more often than
// 10% when two points are truly equal: the region errs on the narrow side, never wide.
#include "core/analysis_region.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/analysis_curve.h"
#include "core/analysis_stats.h"

namespace parity::core {
namespace {

std::string Percent(double fraction) { return absl::StrFormat("%.3g%%", 100 * fraction); }

absl::StatusOr<curve::RateGroup> Gather(std::span<const RateRun> runs) {
  std::vector<const RateRun*> sorted;
  std::set<std::pair<std::string, double>> seen;
  for (const RateRun& r : runs) {
    if (!(r.activation_rate > 0 && r.activation_rate <= 1) || !std::isfinite(r.bpc)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "every run needs r_a in (0, 1] and a finite BPC; got r_a = ", r.activation_rate,
          ", BPC = ", r.bpc, " (run ", r.run_key, ")"));
    }
    if (!seen.insert({r.run_key, r.activation_rate}).second) {
      return absl::InvalidArgumentError(absl::StrCat(
          "run ", r.run_key, " appears twice in one group; pass each run once per group"));
    }
    sorted.push_back(&r);
  }
  std::stable_sort(sorted.begin(), sorted.end(), [](const RateRun* l, const RateRun* r) {
    return l->activation_rate < r->activation_rate;
  });
  curve::RateGroup g;
  for (const RateRun* r : sorted) {
    // Seeds of one grid point share r_a exactly; the tolerance only absorbs decimal round trips.
    if (g.rate.empty() || r->activation_rate > g.rate.back() * (1 + 1e-9)) {
      g.rate.push_back(r->activation_rate);
      g.bpc.emplace_back();
      g.keys.emplace_back();
    }
    g.bpc.back().push_back(r->bpc);
    g.keys.back().push_back(r->run_key);
  }
  double ss = 0;
  for (size_t i = 0; i < g.rate.size(); ++i) {
    g.mean.push_back(stats::Mean(g.bpc[i]));
    g.mean_log_rate += std::log(g.rate[i]) / static_cast<double>(g.rate.size());
    for (double y : g.bpc[i]) ss += (y - g.mean.back()) * (y - g.mean.back());
    g.df_pure += static_cast<int>(g.bpc[i].size()) - 1;
  }
  for (double r : g.rate) g.t.push_back(std::log(r) - g.mean_log_rate);
  if (g.df_pure > 0) g.pooled_sd = std::sqrt(ss / g.df_pure);
  return g;
}

void BestProbabilities(const curve::RateGroup& g, const BootstrapOptions& options,
                       OptimalActivationFit& out) {
  std::vector<std::vector<double>> deviation(g.rate.size());
  bool any_spread = false;
  for (size_t i = 0; i < g.rate.size(); ++i) {
    const double n = static_cast<double>(g.bpc[i].size());
    const double inflate = n > 1 ? std::sqrt(n / (n - 1)) : 0.0;
    for (double y : g.bpc[i]) deviation[i].push_back((y - g.mean[i]) * inflate / n);
    any_spread = any_spread || n > 1;
  }
  const size_t best =
      static_cast<size_t>(std::min_element(g.mean.begin(), g.mean.end()) - g.mean.begin());
  if (!any_spread) {
    out.grid[best].probability_best = 1;
    return;
  }
  std::vector<int> wins(g.rate.size(), 0);
  std::vector<double> mean(g.rate.size());
  for (int k = 0; k < options.resamples; ++k) {
    for (size_t i = 0; i < mean.size(); ++i) {
      mean[i] = g.mean[i];
      for (size_t j = 0; j < deviation[i].size(); ++j) {
        mean[i] += deviation[i][j] * stats::KeyedNormal(options.seed, k, g.keys[i][j]);
      }
    }
    ++wins[static_cast<size_t>(std::min_element(mean.begin(), mean.end()) - mean.begin())];
  }
  out.probability_resamples = options.resamples;
  for (size_t i = 0; i < wins.size(); ++i) {
    out.grid[i].probability_best = static_cast<double>(wins[i]) / options.resamples;
  }
}

void Region(const curve::RateGroup& g, size_t best, OptimalActivationFit& out) {
  out.grid[best].region = RegionMembership::kBest;
  if (g.bpc[best].size() < 2) {
    out.region_note = "one seed at the best point: no test of the others against it is possible";
    return;
  }
  double lo = g.rate[best], hi = g.rate[best];
  int untested = 0;
  for (size_t i = 0; i < g.rate.size(); ++i) {
    if (i == best) continue;
    const std::optional<stats::WelchTest> test = stats::OneSidedWelch(g.bpc[i], g.bpc[best]);
    if (!test) {
      ++untested;
      continue;
    }
    out.grid[i].p_value_above_best = test->p_value;
    out.grid[i].region =
        test->p_value < kTestLevel ? RegionMembership::kOutside : RegionMembership::kInside;
    if (out.grid[i].region == RegionMembership::kInside) {
      lo = std::min(lo, g.rate[i]);
      hi = std::max(hi, g.rate[i]);
    }
  }
  out.region = Interval{lo, hi};
  for (const RatePoint& p : out.grid) {
    if (p.activation_rate > lo && p.activation_rate < hi && p.region != RegionMembership::kBest &&
        p.region != RegionMembership::kInside) {
      out.region_contiguous = false;
    }
  }
  out.region_note = absl::StrCat(
      "grid points whose mean is not above the best's by a one-sided Welch t test at α = 0.10",
      untested > 0 ? absl::StrCat("; ", untested, " point(s) with one seed untested") : "");
}

// Both ends of the grid significantly above the best: the evidence that the minimum is inside.
bool BracketedWithEvidence(const curve::RateGroup& g, size_t best, OptimalActivationFit& out) {
  const size_t last = g.rate.size() - 1;
  if (best == 0 || best == last) {
    out.status = OptimumStatus::kNotBracketed;
    out.reason = absl::StrCat("not bracketed: lowest at the edge r_a = ", Percent(g.rate[best]));
    return false;
  }
  for (size_t end : {size_t{0}, last}) {
    const RatePoint& p = out.grid[end];
    if (p.region == RegionMembership::kOutside) continue;
    out.status = OptimumStatus::kNotBracketed;
    out.reason =
        p.p_value_above_best
            ? absl::StrFormat(
                  "not bracketed with evidence: the end r_a = %s is not significantly "
                  "above the best %s (one-sided Welch p = %.3g ≥ %.2f)",
                  Percent(g.rate[end]), Percent(g.rate[best]), *p.p_value_above_best, kTestLevel)
            : absl::StrCat("not bracketed with evidence: no test of the end r_a = ",
                           Percent(g.rate[end]), " against the best ", Percent(g.rate[best]),
                           " (one seed on a side; run ≥ 2 seeds)");
    return false;
  }
  return true;
}

}  // namespace

absl::StatusOr<OptimalActivationFit> FitOptimalActivation(std::span<const RateRun> runs,
                                                          const BootstrapOptions& options) {
  if (runs.empty()) return absl::InvalidArgumentError("a group needs at least one run");
  absl::StatusOr<curve::RateGroup> gathered = Gather(runs);
  if (!gathered.ok()) return gathered.status();
  const curve::RateGroup& g = *gathered;
  OptimalActivationFit out;
  out.points = static_cast<int>(runs.size());
  out.rates = static_cast<int>(g.rate.size());
  for (size_t i = 0; i < g.rate.size(); ++i) {
    RatePoint& p = out.grid.emplace_back();
    p.activation_rate = g.rate[i];
    p.seeds = static_cast<int>(g.bpc[i].size());
    p.bpc_mean = g.mean[i];
    p.bpc_spread = stats::Spread(g.bpc[i]);
  }
  const size_t best =
      static_cast<size_t>(std::min_element(g.mean.begin(), g.mean.end()) - g.mean.begin());
  out.best_grid_activation_rate = g.rate[best];
  out.best_grid_bpc = g.mean[best];
  BestProbabilities(g, options, out);
  Region(g, best, out);
  if (g.rate.size() < 3) {
    out.status = OptimumStatus::kTooFewRates;
    out.reason = absl::StrCat("an optimum needs ≥ 3 distinct r_a to bracket it; the group has ",
                              g.rate.size());
    return out;
  }
  if (BracketedWithEvidence(g, best, out)) out.status = OptimumStatus::kBracketed;
  curve::FitPointOptimum(g, best, options, out);
  return out;
}

absl::StatusOr<OptimalActivationFit> FitOptimalActivation(std::span<const Observation> runs,
                                                          const BootstrapOptions& options) {
  std::vector<RateRun> keyed;
  for (size_t i = 0; i < runs.size(); ++i) {
    keyed.push_back({runs[i].x, runs[i].y, absl::StrCat("run#", i)});
  }
  return FitOptimalActivation(keyed, options);
}

}  // namespace parity::core
