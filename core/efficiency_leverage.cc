// The joint EL law. Base-2 logs of G and base-10 log of C follow docs/domain.md (bases inferred
// from the published headline figures).
#include "core/efficiency_leverage.h"

#include <cmath>

namespace parity::core {

double SaturatedActivationRatio(double a, const ElLawParams& p) {
  const double offset = 1.0 / (1.0 / p.a_start - 1.0 / p.a_max);
  return 1.0 / (1.0 / (a + offset) + 1.0 / p.a_max);
}

double PredictedEfficiencyLeverage(double activation_ratio, double granularity, double compute,
                                   const ElLawParams& p) {
  if (!(activation_ratio > 0 && activation_ratio <= 1 && granularity > 0 && compute > 0)) {
    return 0.0;
  }
  const double log_g = std::log2(granularity);
  const double alpha = p.a + p.d * std::log10(compute);
  const double exponent = alpha + p.gamma * log_g * log_g + p.beta * log_g;
  return std::pow(SaturatedActivationRatio(activation_ratio, p), exponent);
}

}  // namespace parity::core
