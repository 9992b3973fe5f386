// Internal to the optimum (analysis_region.cc, analysis_optimum.cc): a group's runs gathered by
// r_a, and the local curve fit behind the point optimum. Not part of the analysis' interface.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "core/analysis_region.h"

namespace parity::core::curve {

// A group's runs by ascending r_a.
struct RateGroup {
  std::vector<double> rate;                    // r_a (fraction)
  std::vector<double> t;                       // ln r_a − the group's mean ln r_a
  std::vector<std::vector<double>> bpc;        // per r_a, one BPC per seed
  std::vector<std::vector<std::string>> keys;  // per r_a, the runs' keys
  std::vector<double> mean;                    // mean BPC per r_a
  double mean_log_rate = 0;
  double pooled_sd = 0;  // √(pure-error sum of squares / df_pure), bits per byte
  int df_pure = 0;       // runs − rates
};

// The window of rates [begin, end) the curve is fitted over around `best`.
struct Window {
  size_t begin = 0, end = 0;
};
Window WindowAround(const RateGroup& group, size_t best, int half_window);

// Fits the curve over the window around the best grid point, runs its lack-of-fit test and,
// when `out.status` is left kBracketed by the caller's checks, sets the point optimum and its
// interval. Fills out.lack_of_fit always; changes out.status to kPoorFit or kFitUnchecked (with
// a reason) when the fit cannot support a point optimum.
void FitPointOptimum(const RateGroup& group, size_t best, const BootstrapOptions& options,
                     OptimalActivationFit& out);

}  // namespace parity::core::curve
