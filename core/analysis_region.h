// The optimal activation rate of one group, answered as the papers answer it (docs/domain.md):
//   * the best grid point — the r_a with the lowest mean BPC over seeds;
//   * for every grid point, the share of seed resamples in which it is the best;
//   * the REGION: the grid points not distinguishable from the best at 90% (one-sided Welch test
//     of "this point's mean is above the best's", p ≥ 0.10 keeps a point in the region);
//   * a lack-of-fit test of the fitted curve, and a fitted point optimum with a 90% interval
//     ONLY when that fit passes and both ends of the grid are significantly above the best.
// The point optimum is the vertex of a quadratic in ln r_a through the best grid point and its
// two neighbours; the quadratic over the best point and two neighbours each side is the curve the
// lack-of-fit test checks (locally a smooth minimum is a parabola; one quadratic over the whole
// grid imposes a symmetry skewed curves do not have). Its 90% interval is the region test's
// bracket: the nearest grid points on each side that are significantly above the best
// (analysis_optimum.cc; coverage simulated in core/tests/analysis_coverage_test.cc).
#pragma once

#include <optional>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/analysis_law.h"

namespace parity::core {

// One run of a group.
struct RateRun {
  double activation_rate = 0;  // r_a (fraction in (0, 1])
  double bpc = 0;              // final validation BPC (bits per byte)
  std::string run_key;         // the run id: bootstrap draws are keyed by it (analysis_stats.h)
};

enum class OptimumStatus {
  kBracketed,     // point optimum given: the fit passes and both ends are above the best
  kNotBracketed,  // the best is at an edge, or an end is not significantly above it
  kTooFewRates,   // fewer than three distinct r_a
  kPoorFit,       // the lack-of-fit test rejects the curve, or its minimum is not inside
  kFitUnchecked,  // no lack-of-fit test possible (one seed per r_a, or no spare rate)
};

enum class RegionMembership {
  kBest,      // the best grid point itself
  kInside,    // not distinguishable from the best (one-sided Welch p ≥ 0.10)
  kOutside,   // significantly above the best (p < 0.10)
  kUntested,  // this point or the best has one seed: no test possible
};

// One grid point (one r_a) of the group.
struct RatePoint {
  double activation_rate = 0;  // r_a (fraction)
  int seeds = 0;
  double bpc_mean = 0;    // bits per byte
  double bpc_spread = 0;  // sample standard deviation over seeds; 0 with one seed
  // Share of the within-r_a seed resamples in which this point has the lowest mean (0–1).
  double probability_best = 0;
  RegionMembership region = RegionMembership::kUntested;
  std::optional<double> p_value_above_best;  // one-sided Welch p; unset for the best/untested
};

// Pure-error lack-of-fit F test of the fitted curve against the grid points' means.
struct LackOfFit {
  bool tested = false;
  std::string curve;  // which curve over which r_a, e.g. "quadratic in ln r_a over 10%–30%"
  std::string note;   // why it was not tested
  double f = 0;
  double p_value = 1;
  int df_lack = 0;  // rates in the window − 3
  int df_pure = 0;  // runs in the window − rates in the window
};

struct OptimalActivationFit {
  OptimumStatus status = OptimumStatus::kTooFewRates;
  std::string reason;  // why there is no point optimum; empty when kBracketed
  // Set only when kBracketed; always inside the window's measured r_a.
  double activation_rate = 0;  // r_a at the fitted minimum (fraction)
  double bpc = 0;              // fitted BPC there (bits per byte)
  // The 90% bracket of the optimum's r_a (set with the point optimum only). bpc_interval stays
  // unset: only the location's coverage is verified. resamples and resamples_at_edge stay 0 (the
  // bracket needs no bootstrap); kept for today's callers.
  std::optional<Interval> activation_rate_interval, bpc_interval;
  std::string interval_note;  // why there is no interval
  int resamples = 0;
  int resamples_at_edge = 0;
  double best_grid_activation_rate = 0;  // r_a of the lowest mean over seeds (fraction)
  double best_grid_bpc = 0;              // that mean (bits per byte)
  int points = 0;                        // runs
  int rates = 0;                         // distinct r_a

  std::vector<RatePoint> grid;     // ascending r_a
  std::optional<Interval> region;  // r_a span (fraction) of the best and the kInside points
  bool region_contiguous = true;   // false when a kOutside/kUntested point lies inside the span
  std::string region_note;         // the test, or why there is no region
  int probability_resamples = 0;   // 0 when no r_a has two seeds (then only the best has 1)
  LackOfFit lack_of_fit;
};

// The optimum of one group's runs. InvalidArgument for r_a outside (0, 1], a non-finite BPC or
// a run repeated with the same key and r_a; otherwise `status` says what could be answered.
absl::StatusOr<OptimalActivationFit> FitOptimalActivation(std::span<const RateRun> runs,
                                                          const BootstrapOptions& options = {});
// The same for runs without ids (keys "run#0", "run#1", … in order): tests and tools.
absl::StatusOr<OptimalActivationFit> FitOptimalActivation(std::span<const Observation> runs,
                                                          const BootstrapOptions& options = {});

}  // namespace parity::core
